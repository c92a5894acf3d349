package controlplane

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
)

// StartProcess starts bin with args, its output in logPath, in a process
// group of its own (so a stop reaches its children). Unless detach, it is
// killed when this process dies, so a crashed test leaves nothing running.
func StartProcess(detach bool, logPath, bin string, args ...string) (*exec.Cmd, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if !detach {
		cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	}
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return nil, err
	}
	_ = logf.Close()
	return cmd, nil
}

// Exited reports whether a started process has exited (it may not have been
// reaped yet: a zombie counts as exited).
func Exited(cmd *exec.Cmd) bool {
	if cmd.ProcessState != nil {
		return true
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", cmd.Process.Pid))
	if err != nil {
		return true
	}
	// The state follows the command name in parentheses: "pid (comm) S ...".
	i := strings.LastIndexByte(string(b), ')')
	return i < 0 || i+2 >= len(b) || b[i+2] == 'Z' || b[i+2] == 'X'
}

// LogTail is the last n bytes of a component's log file (or why it cannot
// be read), for an error message.
func LogTail(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > n {
		_, _ = f.Seek(st.Size()-n, io.SeekStart)
	}
	b, _ := io.ReadAll(f)
	return string(b)
}
