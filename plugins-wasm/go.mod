module github.com/wasmsched/wasmsched/plugins-wasm

go 1.24

require github.com/wasmsched/wasmsched/guest-sdk v0.0.0

replace github.com/wasmsched/wasmsched/guest-sdk => ../guest-sdk
