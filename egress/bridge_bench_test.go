package egress

import (
	"bufio"
	"context"
	"io"
	"net"
	"path/filepath"
	"testing"
)

// BenchmarkBridge is the sandbox's bridge in one process with a stand-in
// for the proxy on a Unix socket: a small request and its answer, one
// connection each, and a 16 MiB answer; each through the bridge and
// straight to the socket, whose difference is what the bridge costs.
func BenchmarkBridge(b *testing.B) {
	socket := filepath.Join(b.TempDir(), "egress.sock")
	up, err := net.Listen("unix", socket)
	if err != nil {
		b.Fatal(err)
	}
	defer up.Close()
	big := make([]byte, 16<<20)
	tcpUp, _ := net.Listen("tcp", "127.0.0.1:0")
	for _, up := range []net.Listener{up, tcpUp} {
		go func() {
			for {
				c, err := up.Accept()
				if err != nil {
					return
				}
				go func() {
					defer c.Close()
					br := bufio.NewReader(c)
					line, _ := br.ReadString('\n')
					for {
						l, err := br.ReadString('\n')
						if err != nil || l == "\r\n" {
							break
						}
					}
					if line == "GET http://x/big HTTP/1.1\r\n" {
						io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 16777216\r\nConnection: close\r\n\r\n")
						c.Write(big)
						return
					}
					io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
				}()
			}
		}()
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go Bridge(ctx, ln, socket)
	for _, path := range []struct{ name, network, addr string }{{"bridge", "tcp", ln.Addr().String()}, {"socket", "unix", socket}, {"tcp", "tcp", tcpUp.Addr().String()}} {
		for _, req := range []struct{ name, target string }{{"small", "small"}, {"16MiB", "big"}} {
			b.Run(path.name+"/"+req.name, func(b *testing.B) {
				if req.target == "big" {
					b.SetBytes(int64(len(big)))
				}
				for b.Loop() {
					c, err := net.Dial(path.network, path.addr)
					if err != nil {
						b.Fatal(err)
					}
					io.WriteString(c, "GET http://x/"+req.target+" HTTP/1.1\r\nHost: x\r\n\r\n")
					if _, err := io.Copy(io.Discard, c); err != nil {
						b.Fatal(err)
					}
					c.Close()
				}
			})
		}
	}
}
