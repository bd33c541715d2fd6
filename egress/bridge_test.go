package egress

import (
	"bufio"
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestBridgeFile carries a connection to the TCP address the file holds
// when it arrives, and refuses connections while the file is missing or
// holds no address.
func TestBridgeFile(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	up, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	go func() {
		for {
			c, err := up.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				line, _ := bufio.NewReader(c).ReadString('\n')
				c.Write([]byte("upstream got " + line))
			}()
		}
	}()
	file := filepath.Join(t.TempDir(), "upstream")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go BridgeFile(ctx, ln, file)
	say := func() string {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		c.Write([]byte("hello\n"))
		line, _ := bufio.NewReader(c).ReadString('\n')
		return line
	}
	if got := say(); got != "" {
		t.Errorf("without the file: %q, want the connection closed", got)
	}
	os.WriteFile(file, []byte("not an address\n"), 0o644)
	if got := say(); got != "" {
		t.Errorf("with a malformed file: %q, want the connection closed", got)
	}
	os.WriteFile(file, []byte(up.Addr().String()+"\n"), 0o644)
	if got := say(); got != "upstream got hello\n" {
		t.Errorf("through the bridge: %q", got)
	}
}
