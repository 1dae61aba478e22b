package sandbox

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// A command with Spec.Proxy has no network of its own (its own network
// namespace, with only loopback up) and reaches the outside through an
// HTTP proxy on the host, listening on a unix socket. Under bubblewrap,
// the command runs as
//
//	/proc/self/fd/<this binary> forwardArg <socket's fd> -- argv...
//
// with this binary and the socket passed as open descriptors (opened by
// the server, so that bubblewrap, which may run as the sandbox's uid,
// need not reach a private directory; nothing is mounted). The forwarder
// listens on an ephemeral port of 127.0.0.1, starts a copy of itself
// (relayArg) that relays each connection to that port to the socket, sets
// HTTP_PROXY, HTTPS_PROXY, http_proxy and https_proxy to
// http://127.0.0.1:<port> (NO_PROXY and no_proxy empty, ALL_PROXY unset),
// closes both descriptors and executes the command in its place: the
// command is still the process the caller stops and waits for, and the
// relay, its child, ends with it (the end of bubblewrap's pid namespace
// kills it). What may be reached is the proxy's to decide; the sandbox
// only gives a command no other way out.
const (
	forwardArg = "__toolbelt_egress_forward"
	relayArg   = "__toolbelt_egress_relay"
)

// proxyVars are the variables the forwarder sets (and the ones it
// removes: ALL_PROXY would send a client elsewhere).
var proxyVars = []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"}

func init() {
	if len(os.Args) > 4 && os.Args[1] == forwardArg && os.Args[3] == "--" {
		err := forwardMain(os.Args[2], os.Args[4:])
		fmt.Fprintf(os.Stderr, "sandbox: egress forwarder: %v\n", err)
		os.Exit(126)
	}
	if len(os.Args) == 2 && os.Args[1] == relayArg {
		err := relayMain()
		fmt.Fprintf(os.Stderr, "sandbox: egress relay: %v\n", err)
		os.Exit(1)
	}
}

// checkProxy refuses a Spec.Proxy that cannot be given: the forwarder is
// shown in the sandbox by bubblewrap, and the proxy is the only way out.
func checkProxy(spec Spec, backend string) error {
	if spec.Proxy == "" {
		return nil
	}
	if spec.Network {
		return errors.New("sandbox: a command with an egress proxy has no network of its own (Network must be false)")
	}
	if backend != "bubblewrap" {
		return errors.New("sandbox: an egress proxy needs bubblewrap")
	}
	if st, err := os.Stat(spec.Proxy); err != nil || st.Mode().Type() != os.ModeSocket {
		return fmt.Errorf("sandbox: egress proxy %q is not a unix socket", spec.Proxy)
	}
	return nil
}

// proxyArgs is the argv that runs spec's command through the
// forwarder; fd passes a descriptor to bubblewrap, which leaves it open
// for the command, and names its number.
func proxyArgs(spec Spec, fd func(*os.File) string) ([]string, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("sandbox: egress forwarder: %w", err)
	}
	exe, err := os.Open(self)
	if err != nil {
		return nil, fmt.Errorf("sandbox: egress forwarder: %w", err)
	}
	exeFD := fd(exe)
	sock, err := unix.Open(spec.Proxy, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("sandbox: egress proxy: %w", err)
	}
	return append([]string{"/proc/self/fd/" + exeFD, forwardArg, fd(os.NewFile(uintptr(sock), "proxy")), "--"}, spec.Argv...), nil
}

// forwardMain runs in the sandbox: it listens on loopback, starts the
// relay and executes argv with the proxy's variables. It returns only on
// failure.
func forwardMain(socketFD string, argv []string) error {
	n, err := strconv.Atoi(socketFD)
	if err != nil || n < 3 {
		return fmt.Errorf("socket descriptor %q", socketFD)
	}
	socket := os.NewFile(uintptr(n), "proxy")
	ln, err := net.ListenTCP("tcp4", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return fmt.Errorf("listen on loopback: %w", err)
	}
	listener, err := ln.File()
	if err != nil {
		return err
	}
	relay := exec.Command("/proc/self/exe", relayArg)
	relay.ExtraFiles = []*os.File{listener, socket}
	relay.Stderr = os.Stderr
	if err := relay.Start(); err != nil {
		return fmt.Errorf("start the relay: %w", err)
	}
	env := withProxy(os.Environ(), "http://"+ln.Addr().String())
	path, err := lookPath(argv[0], env)
	if err != nil {
		return err
	}
	// The relay holds the listener and the socket; the command gets
	// neither, nor this binary (bubblewrap left it open as argv[0]).
	for _, fd := range []int{n, exeFD()} {
		if fd >= 0 {
			syscall.CloseOnExec(fd)
		}
	}
	return syscall.Exec(path, argv, env)
}

// exeFD is the descriptor this binary was executed from (-1: none).
func exeFD() int {
	n, err := strconv.Atoi(strings.TrimPrefix(os.Args[0], "/proc/self/fd/"))
	if err != nil || !strings.HasPrefix(os.Args[0], "/proc/self/fd/") {
		return -1
	}
	return n
}

// withProxy is env with the proxy variables set to url and the others
// that would name another proxy, or none, removed.
func withProxy(env []string, url string) []string {
	out := make([]string, 0, len(env)+len(proxyVars))
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if !isProxyVar(name) {
			out = append(out, kv)
		}
	}
	for _, name := range proxyVars[:4] {
		out = append(out, name+"="+url)
	}
	return append(out, "NO_PROXY=", "no_proxy=")
}

func isProxyVar(name string) bool {
	for _, v := range proxyVars {
		if name == v {
			return true
		}
	}
	return false
}

// relayMain accepts connections on the listener at fd 3 and relays each
// to the proxy's socket, open at fd 4.
func relayMain() error {
	ln, err := net.FileListener(os.NewFile(3, "listener"))
	if err != nil {
		return err
	}
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		go relay(c, "/proc/self/fd/4")
	}
}

// relay copies both ways between c and a new connection to socket, each
// direction closed for writing once the other end stopped sending.
func relay(c net.Conn, socket string) {
	defer c.Close()
	up, err := net.Dial("unix", socket)
	if err != nil {
		fmt.Fprintf(os.Stderr, "sandbox: egress relay: %v\n", err)
		return
	}
	defer up.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		io.Copy(up, c)
		up.(*net.UnixConn).CloseWrite()
	}()
	io.Copy(c, up)
	c.(*net.TCPConn).CloseWrite()
	<-done
}
