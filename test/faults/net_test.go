package faults

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/podpatch/podpatch/test/cluster"
)

// balancer is the in-test stand-in for podpatch's Service: a TCP load balancer that hands each
// connection to the next ready backend, round robin. Like endpoints, it drops a backend whose
// /readyz fails (polled every readyPoll) and, like a kube-proxy that skips a refused endpoint,
// one it cannot dial.
type balancer struct {
	ln       net.Listener
	mu       sync.Mutex
	backends []*backend
	next     int
	stop     chan struct{}
	wg       sync.WaitGroup
}

type backend struct {
	addr, probe string
	ready       atomic.Bool
}

const readyPoll = 200 * time.Millisecond

func newBalancer() (*balancer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	b := &balancer{ln: ln, stop: make(chan struct{})}
	b.wg.Add(2)
	go b.accept()
	go b.poll()
	return b, nil
}

func (b *balancer) port() int { return b.ln.Addr().(*net.TCPAddr).Port }

// add puts a backend behind the balancer; it gets connections once its /readyz answers 200.
func (b *balancer) add(addr, probe string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.backends = append(b.backends, &backend{addr: addr, probe: probe})
}

// remove takes a backend out.
func (b *balancer) remove(addr string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, be := range b.backends {
		if be.addr == addr {
			b.backends = append(b.backends[:i], b.backends[i+1:]...)
			return
		}
	}
}

func (b *balancer) poll() {
	defer b.wg.Done()
	hc := &http.Client{Timeout: time.Second}
	t := time.NewTicker(readyPoll)
	defer t.Stop()
	for {
		b.mu.Lock()
		bs := append([]*backend(nil), b.backends...)
		b.mu.Unlock()
		for _, be := range bs {
			resp, err := hc.Get("http://" + be.probe + "/readyz")
			ok := err == nil && resp.StatusCode == http.StatusOK
			if err == nil {
				resp.Body.Close()
			}
			be.ready.Store(ok)
		}
		select {
		case <-b.stop:
			return
		case <-t.C:
		}
	}
}

// pick returns the ready backends, starting with the next in turn.
func (b *balancer) pick() []*backend {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []*backend
	n := len(b.backends)
	for i := range n {
		be := b.backends[(b.next+i)%n]
		if be.ready.Load() {
			out = append(out, be)
		}
	}
	b.next++
	return out
}

func (b *balancer) accept() {
	defer b.wg.Done()
	for {
		c, err := b.ln.Accept()
		if err != nil {
			return
		}
		go b.serve(c)
	}
}

func (b *balancer) serve(c net.Conn) {
	for _, be := range b.pick() {
		up, err := net.DialTimeout("tcp", be.addr, time.Second)
		if err != nil {
			be.ready.Store(false) // dead: dropped until its probe answers again
			continue
		}
		splice(c, up)
		return
	}
	c.Close()
}

func (b *balancer) close() {
	close(b.stop)
	b.ln.Close()
	b.wg.Wait()
}

// splice copies both ways until either side closes, then closes both.
func splice(a, b net.Conn) {
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go cp(a, b)
	go cp(b, a)
	<-done
	a.Close()
	b.Close()
}

// proxy is a TCP proxy between podpatch and kube-apiserver that the test can cut: cut closes
// every connection through it and stops listening, so that podpatch's connections are refused
// (the API server unreachable, a partition), until heal listens again on the same address.
type proxy struct {
	port    *cluster.HeldPort // held while cut, so that heal finds it free
	address string
	target  string
	mu      sync.Mutex
	ln      net.Listener // nil while cut
	conns   map[net.Conn]struct{}
}

func newProxy(target string) (*proxy, error) {
	port, err := cluster.HoldPort()
	if err != nil {
		return nil, err
	}
	ln, err := port.Listen(context.Background())
	if err != nil {
		return nil, errors.Join(err, port.Release())
	}
	p := &proxy{port: port, address: port.Addr(), target: target, ln: ln, conns: map[net.Conn]struct{}{}}
	go p.accept(ln)
	return p, nil
}

func (p *proxy) addr() string { return p.address }

func (p *proxy) accept(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go p.serve(c)
	}
}

func (p *proxy) serve(c net.Conn) {
	up, err := net.DialTimeout("tcp", p.target, 2*time.Second)
	if err != nil {
		c.Close()
		return
	}
	if !p.track(c, up) {
		c.Close()
		up.Close()
		return
	}
	splice(c, up)
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, up)
	p.mu.Unlock()
}

// track records open connections; false when cut.
func (p *proxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln == nil {
		return false
	}
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
	return true
}

// cut stops listening and closes every connection until heal.
func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

// heal listens again on the same address.
func (p *proxy) heal() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		return nil
	}
	ln, err := p.port.Listen(context.Background())
	if err != nil {
		return err
	}
	p.ln = ln
	go p.accept(ln)
	return nil
}

func (p *proxy) close() {
	p.cut()
	_ = p.port.Release()
}
