module github.com/wasmsched/wasmsched/guest-sdk

go 1.24
