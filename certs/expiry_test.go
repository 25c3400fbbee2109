package certs

import (
	"context"
	"sync"
	"testing"
	"time"
)

func TestWatchExpiryReportsLoadAndReload(t *testing.T) {
	dir := t.TempDir()
	first, err := Generate(GenerateOptions{Service: "podpatch", Namespace: "podpatch-system", CertValidity: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteFiles(dir, first); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []time.Time
	reported := func() []time.Time {
		mu.Lock()
		defer mu.Unlock()
		return append([]time.Time(nil), seen...)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- WatchExpiry(dir, func(at time.Time) {
			mu.Lock()
			defer mu.Unlock()
			seen = append(seen, at)
		})(ctx)
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("WatchExpiry: %v", err)
		}
	}()
	waitUntil(t, func() bool { return len(reported()) >= 1 }, "the first load was never reported")
	wantFirst := time.Now().Add(time.Hour)
	if got := reported()[0]; got.Before(wantFirst.Add(-time.Minute)) || got.After(wantFirst.Add(time.Minute)) {
		t.Fatalf("first expiry %v, want about %v", got, wantFirst)
	}

	second, err := Generate(GenerateOptions{Service: "podpatch", Namespace: "podpatch-system", CertValidity: 48 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteFiles(dir, second); err != nil {
		t.Fatal(err)
	}
	wantSecond := time.Now().Add(48 * time.Hour)
	waitUntil(t, func() bool {
		r := reported()
		return r[len(r)-1].After(wantSecond.Add(-time.Minute))
	}, "the reload was never reported")
}

func waitUntil(t *testing.T, cond func() bool, msg string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal(msg)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
