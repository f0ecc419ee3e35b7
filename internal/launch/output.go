package launch

import (
	"bytes"
	"io"
	"sync"
)

// maxLine bounds a buffered partial line; a longer one is emitted in pieces, each with
// the prefix, rather than held in memory.
const maxLine = 64 << 10

// lineWriter prefixes every line written through it and writes whole lines only, under
// a mutex shared by all ranks, so lines of different ranks never interleave mid-line.
type lineWriter struct {
	w      io.Writer
	mu     *sync.Mutex
	prefix string
	buf    []byte
}

func (l *lineWriter) Write(p []byte) (int, error) {
	n := len(p)
	l.buf = append(l.buf, p...)
	var out []byte
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			if len(l.buf) < maxLine {
				break
			}
			i = maxLine - 1
			out = append(append(append(out, l.prefix...), l.buf[:i+1]...), '\n')
			l.buf = l.buf[i+1:]
			continue
		}
		out = append(append(out, l.prefix...), l.buf[:i+1]...)
		l.buf = l.buf[i+1:]
	}
	if len(out) > 0 {
		l.mu.Lock()
		_, err := l.w.Write(out)
		l.mu.Unlock()
		if err != nil {
			return n, err
		}
	}
	if len(l.buf) == 0 {
		l.buf = nil // let a burst's buffer go
	}
	return n, nil
}

// Flush writes a final line that had no newline.
func (l *lineWriter) Flush() {
	if len(l.buf) == 0 {
		return
	}
	l.mu.Lock()
	_, _ = l.w.Write(append(append([]byte(l.prefix), l.buf...), '\n'))
	l.mu.Unlock()
	l.buf = nil
}
