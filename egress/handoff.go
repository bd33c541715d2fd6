package egress

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
)

// The hand-over. The sandbox's bridge accepts the agent's TCP connection
// on 127.0.0.1:3128, dials the proxy's Unix socket and sends, in one
// message, handoffMessage with the accepted socket's descriptor attached
// (SCM_RIGHTS, unix(7)). The proxy answers one byte: ackTaken once it
// holds the descriptor, after which it serves the TCP connection itself
// with every bound a connection on its socket gets, and the bridge closes
// its copy and the Unix connection, out of the data path; ackNone when
// the message came without a descriptor. Any other answer, or none, and
// the bridge carries the connection as before: it copies both ways over
// a Unix connection of its own.
//
// The message starts with a NUL, which no HTTP request does (RFC 9112
// §2.2, §3: a request starts with a method token, after at most a few
// empty lines), so the proxy tells it from a request by its first byte.
// The newline after it makes a proxy that knows nothing of the hand-over
// answer 400 at once instead of waiting for the rest of a request line.
const (
	handoffMessage = "\x00\n"
	handoffMarker  = 0x00 // handoffMessage[0]
	ackTaken       = 0x06 // ASCII ACK
	ackNone        = 0x15 // ASCII NAK: no descriptor arrived
)

// refusedStatus is how the proxy's refusal of a connection over MaxConns
// starts (refuseConn); the bridge passes that answer on to the client.
const refusedStatus = "HTTP/1.1 503"

// unixBridge is the bridge to a proxy on a Unix socket.
type unixBridge struct {
	socket  string
	buffers sync.Pool
	// copyOnly is set once the proxy showed it cannot take connections
	// (gVisor's sockets do not cross to the host, or a proxy from before
	// the hand-over): from then on every connection is copied.
	copyOnly atomic.Bool
}

// handOff is what became of an attempt to hand a connection over.
type handOff int

const (
	handed   handOff = iota // the proxy holds the connection
	failed                  // it does not; copy this connection
	cannot                  // it does not and will not; copy from now on
	answered                // the proxy refused it with an HTTP answer
)

func (b *unixBridge) serve(ctx context.Context, c net.Conn) {
	defer c.Close()
	if !b.copyOnly.Load() {
		u, err := dialRetry(ctx, "unix", b.socket)
		if err != nil {
			return
		}
		switch out, reply := handOver(c, u); out {
		case handed:
			u.Close()
			return
		case answered:
			// The proxy read nothing: its answer is the client's, and
			// the rest goes on as a copied connection would.
			defer u.Close()
			if _, err := c.Write(reply); err == nil {
				bridgeCopy(c, u, &b.buffers)
			}
			return
		case cannot:
			b.copyOnly.Store(true)
		}
		u.Close()
	}
	u, err := dialRetry(ctx, "unix", b.socket)
	if err != nil {
		return
	}
	defer u.Close()
	bridgeCopy(c, u, &b.buffers)
}

// handOver offers c to the proxy at the other end of u. Nothing of c's is
// read or written here, so whatever the outcome the client's bytes are
// all still in c for whoever serves it. With answered, reply is the start
// of the proxy's HTTP answer, read from u.
func handOver(c, u net.Conn) (handOff, []byte) {
	if err := sendConn(c, u); err != nil {
		switch {
		case errors.Is(err, errNoHandoff):
			return cannot, nil
		case !errors.Is(err, syscall.EPIPE) && !errors.Is(err, syscall.ECONNRESET):
			return failed, nil
		}
		// The proxy closed its end first: it may have refused the
		// connection (over MaxConns) before the message arrived, its
		// answer waiting to be read.
	}
	reply := make([]byte, len(refusedStatus))
	n, _ := io.ReadAtLeast(u, reply, 1)
	switch {
	case n == 0:
		// Closed without an answer: the proxy refused the message or
		// went away, and did not serve c.
		return failed, nil
	case reply[0] == ackTaken:
		return handed, nil
	case reply[0] == ackNone:
		return cannot, nil
	}
	m, _ := io.ReadFull(u, reply[n:])
	if string(reply[:n+m]) == refusedStatus {
		return answered, reply[:n+m]
	}
	// An answer to the message as to a request: a proxy that does not
	// know the hand-over.
	return cannot, nil
}

// errNoHandoff says that no connection can be handed over this way.
var errNoHandoff = errors.New("connections cannot be handed to the proxy")

// The listener's hand-over. Once at start, and again whenever the proxy
// it handed to is gone, the sandbox's bridge dials the proxy's Unix
// socket and sends listenMessage with its listening socket attached. The
// proxy answers ackTaken once it holds it and then accepts the sandbox's
// connections from it itself, as from its own listener: the bridge does
// nothing per connection. The bridge keeps the Unix connection open as
// the lease: when it ends, the proxy closes its copy of the listener, and
// the bridge, seeing the proxy gone, hands the listener to the next one.
// Meanwhile connections wait in the listener's backlog. A proxy that
// answers anything else, or closes without an answer, does not take
// listeners, and the bridge accepts and hands over (or copies) each
// connection as before.
const listenMessage = "\x00L\n"

// maxHeld is the most listeners the proxy holds at once. A sandbox's
// bridge hands over one; whatever else connects to the socket (the agent)
// can send more, each a listener of the sandbox's own loopback that
// reaches nothing the agent cannot reach by connecting to the proxy. A
// newer listener closes the oldest: the bridge whose listener that was
// sees its lease end and hands it over again.
const maxHeld = 4

// heldListeners are the listeners the proxy holds, oldest first, each by
// the function that ends its lease.
type heldListeners struct {
	mu   sync.Mutex
	next uint64
	held []heldListener
}

type heldListener struct {
	id  uint64
	end func()
}

// add holds a listener whose lease end ends, closing the oldest beyond
// maxHeld, and returns the function that lets go of it.
func (h *heldListeners) add(end func()) (remove func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for len(h.held) >= maxHeld {
		h.held[0].end()
		h.held = h.held[1:]
	}
	h.next++
	id := h.next
	h.held = append(h.held, heldListener{id: id, end: end})
	return func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		for i := range h.held {
			if h.held[i].id == id {
				h.held = append(h.held[:i:i], h.held[i+1:]...)
				return
			}
		}
	}
}

// count says how many listeners the proxy holds.
func (h *heldListeners) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.held)
}
