package certs

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestClientCAFileBounded: a client CA file over MaxCABundleSize is refused, with an error
// naming the limit, without being read — whatever its size and however it got there (a large
// regular file, one that grew while being read, a pipe whose size the stat does not tell);
// the last good pool is kept, and memory does not grow with the file.
func TestClientCAFileBounded(t *testing.T) {
	dir := t.TempDir()
	ca, err := newCA("a", time.Now(), time.Hour)
	require.NoError(t, err)
	file := filepath.Join(dir, "ca.crt")
	require.NoError(t, os.WriteFile(file, ca.certPEM, 0o644))
	c := &clientCAs{file: file}
	good, err := c.current()
	require.NoError(t, err)

	rng := rand.New(rand.NewPCG(5, 21))
	sizes := []int64{MaxCABundleSize + 1, MaxCABundleSize + 4096, 200 << 20}
	for range 5 {
		sizes = append(sizes, MaxCABundleSize+1+rng.Int64N(1<<30))
	}
	for _, size := range sizes {
		// Sparse: the file claims size bytes without taking them on disk.
		f, err := os.Create(filepath.Join(dir, "huge.tmp"))
		require.NoError(t, err)
		_, err = f.Write(ca.certPEM) // a valid start, so only the size can refuse it
		require.NoError(t, err)
		require.NoError(t, f.Truncate(size))
		require.NoError(t, f.Close())
		require.NoError(t, os.Rename(f.Name(), file))

		_, err = ReadCABundle(file)
		require.Error(t, err, "size %d", size)
		assert.Contains(t, err.Error(), "over the limit of 330000 bytes")

		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		pool, err := c.current()
		runtime.ReadMemStats(&after)
		require.NoError(t, err, "the last good pool is kept")
		assert.Same(t, good, pool)
		assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(2*MaxCABundleSize), "size %d: the file was not read", size)
		assert.ErrorContains(t, c.lastErr, "over the limit of 330000 bytes")
		reads := c.reads
		for range 100 {
			_, err := c.current()
			require.NoError(t, err)
		}
		assert.Equal(t, reads, c.reads, "size %d: a file refused for its size is not opened again until it changes", size)
	}

	// A pipe has no size to stat: the read itself stops past the limit.
	fifo := filepath.Join(dir, "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	go func() {
		w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err != nil {
			return
		}
		defer w.Close()
		chunk := bytes.Repeat([]byte("A"), 64<<10)
		for range (8 << 20) / len(chunk) { // 8 MiB, or until the reader closes
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}()
	_, err = ReadCABundle(fifo)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "over the limit of 330000 bytes")

	// At the limit exactly, a bundle is read.
	bundle := bytes.Repeat(ca.certPEM, int(MaxCABundleSize)/len(ca.certPEM))
	require.LessOrEqual(t, len(bundle), int(MaxCABundleSize))
	require.NoError(t, os.WriteFile(file, bundle, 0o644))
	_, err = ReadCABundle(file)
	require.NoError(t, err)
}

// TestClientCAFileChangeDetection: the client CA file is read again only when it changed —
// rewritten in place to another size, replaced by a rename, swapped behind a symlink as a
// ConfigMap volume does, touched — and otherwise at most every clientCARecheck, however many
// handshakes there are. A read that fails keeps the last good pool and is retried at the
// next handshake.
func TestClientCAFileChangeDetection(t *testing.T) {
	dir := t.TempDir()
	cas := make([][]byte, 4)
	for i := range cas {
		ca, err := newCA("ca", time.Now(), time.Hour)
		require.NoError(t, err)
		cas[i] = ca.certPEM
	}
	// A ConfigMap volume: file -> ..data/ca.crt, ..data -> ..v1, swapped by a rename.
	vol := filepath.Join(dir, "vol")
	require.NoError(t, os.MkdirAll(filepath.Join(vol, "..v0"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(vol, "..v0", "ca.crt"), cas[0], 0o644))
	require.NoError(t, os.Symlink("..v0", filepath.Join(vol, "..data")))
	file := filepath.Join(vol, "ca.crt")
	require.NoError(t, os.Symlink(filepath.Join("..data", "ca.crt"), file))

	now := time.Now()
	c := &clientCAs{file: file, now: func() time.Time { return now }}
	subjects := func() [][]byte {
		t.Helper()
		pool, err := c.current()
		require.NoError(t, err)
		//lint:ignore SA1019 the pools are built from files, not the system roots
		return pool.Subjects()
	}
	handshakes := func(n int) {
		t.Helper()
		for range n {
			subjects()
		}
	}
	want := func(i int) [][]byte {
		pool, err := parseCABundle(cas[i])
		require.NoError(t, err)
		//lint:ignore SA1019 as above
		return pool.Subjects()
	}
	requireReads := func(n int, why string) {
		t.Helper()
		require.Equal(t, n, c.reads, why)
	}

	handshakes(1000)
	requireReads(1, "unchanged: read once for 1000 handshakes")
	assert.Equal(t, want(0), subjects())

	// The ConfigMap is updated: a new directory, the ..data link renamed over.
	require.NoError(t, os.MkdirAll(filepath.Join(vol, "..v1"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(vol, "..v1", "ca.crt"), cas[1], 0o644))
	require.NoError(t, os.Symlink("..v1", filepath.Join(vol, "..tmp")))
	require.NoError(t, os.Rename(filepath.Join(vol, "..tmp"), filepath.Join(vol, "..data")))
	assert.Equal(t, want(1), subjects())
	handshakes(100)
	requireReads(2, "the symlink swap is one change")

	// Replaced by a rename over the target (another inode): one more read.
	target := filepath.Join(vol, "..v1", "ca.crt")
	require.NoError(t, writeAtomic(filepath.Dir(target), filepath.Base(target), cas[2], 0o644))
	assert.Equal(t, want(2), subjects())
	handshakes(100)
	requireReads(3, "a rename is one change")

	// Rewritten in place, same inode, two certificates: another size.
	require.NoError(t, os.WriteFile(target, append(append([]byte{}, cas[2]...), cas[3]...), 0o644))
	assert.Len(t, subjects(), 2)
	requireReads(4, "a new size is a change")

	// Touched only: read (same content, same pool).
	pool, err := c.current()
	require.NoError(t, err)
	later := time.Now().Add(time.Hour)
	require.NoError(t, os.Chtimes(target, later, later))
	again, err := c.current()
	require.NoError(t, err)
	assert.Same(t, pool, again, "the same content keeps its pool")
	requireReads(5, "a new modification time is a change")

	// Rewritten in place to the same size with the old timestamp: the stat cannot tell, so
	// the new content shows once clientCARecheck has passed, and not before.
	fi, err := os.Stat(target)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(target, append(append([]byte{}, cas[3]...), cas[2]...), 0o644))
	require.NoError(t, os.Chtimes(target, fi.ModTime(), fi.ModTime()))
	handshakes(10)
	requireReads(5, "an identical stat is not read before the recheck")
	now = now.Add(clientCARecheck)
	subjects()
	requireReads(6, "read again after clientCARecheck")
	handshakes(10)
	requireReads(6, "and not again until the next one")

	// Gone: the last good pool, and a read at every handshake until it is back.
	require.NoError(t, os.Remove(target))
	handshakes(3)
	requireReads(9, "a missing file is looked for at each handshake")
	require.NoError(t, os.WriteFile(target, cas[0], 0o644))
	assert.Equal(t, want(0), subjects())
	handshakes(10)
	requireReads(10, "back, read once")
}
