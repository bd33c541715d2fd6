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
// connection each, and a 16 MiB answer; through the bridge handing each
// connection over (where the OS can; see handoffMessage), through the
// bridge copying it, and straight to the socket and to a TCP stand-in,
// whose differences are what the bridge costs.
func BenchmarkBridge(b *testing.B) {
	socket := filepath.Join(b.TempDir(), "egress.sock")
	up, err := net.Listen("unix", socket)
	if err != nil {
		b.Fatal(err)
	}
	defer up.Close()
	big := make([]byte, 16<<20)
	answer := func(c net.Conn, r io.Reader) {
		defer c.Close()
		br := bufio.NewReader(r)
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
	}
	tcpUp, _ := net.Listen("tcp", "127.0.0.1:0")
	for _, up := range []net.Listener{up, tcpUp} {
		go func() {
			for {
				c, err := up.Accept()
				if err != nil {
					return
				}
				uc, ok := c.(*net.UnixConn)
				if !ok {
					go answer(c, c)
					continue
				}
				// As the proxy does (serveUnix), without its checks: take
				// a connection handed over, or answer on this one.
				go func() {
					buf, oob := make([]byte, firstRead), make([]byte, 64)
					n, oobn, _, _, err := uc.ReadMsgUnix(buf, oob)
					if err != nil {
						c.Close()
						return
					}
					fds, _ := rights(oob[:oobn])
					if len(fds) == 0 {
						answer(c, &prefixed{pre: buf[:n], r: c})
						return
					}
					c.Write([]byte{ackTaken})
					c.Close()
					fd, why := take(fds, 0, false, buf[:n], handoffMessage, checkTCP)
					var hc *handedConn
					if why == "" {
						hc, why = newHandedConn(fd)
					}
					if hc == nil {
						b.Errorf("stand-in: %s", why)
						return
					}
					answer(hc, hc)
				}()
			}
		}()
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	bridges := map[bool]string{}
	for _, copyOnly := range []bool{false, true} {
		ln, err := ListenBridge(ctx, "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		br := &unixBridge{socket: socket}
		br.copyOnly.Store(copyOnly)
		go serveConns(ctx, ln, nil, nil, func(c net.Conn) { br.serve(ctx, c) })
		bridges[copyOnly] = ln.Addr().String()
	}
	for _, path := range []struct{ name, network, addr string }{
		{"bridge", "tcp", bridges[false]},
		{"bridge-copying", "tcp", bridges[true]},
		{"socket", "unix", socket},
		{"tcp", "tcp", tcpUp.Addr().String()},
	} {
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
