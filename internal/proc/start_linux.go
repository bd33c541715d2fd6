package proc

import (
	"os"
	"strconv"
	"strings"
)

// Start is when process pid started, in clock ticks since boot: the
// 22nd field of /proc/PID/stat (proc(5)); "" when it cannot be read.
func Start(pid int) string {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	// pid (comm) state ppid ...: comm may hold spaces and parentheses.
	s := string(data)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 20 {
		return ""
	}
	return f[19] // fields from the 3rd on: the 22nd is f[19]
}
