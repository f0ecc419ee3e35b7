package goccl

import (
	"context"
	"testing"
)

// The queue hands operations out in issue order through every way its array is reused:
// filling up while some were taken (compacted in place), emptying (started again at
// the front), and a burst larger than an idle queue keeps (dropped when it empties).
func TestQueueOrderAcrossReuse(t *testing.T) {
	c := &Comm{wake: make(chan struct{}, 1)}
	ctx := context.Background()
	var issued, taken int
	compacted := false
	push := func(n int) {
		for range n {
			if c.qhead > 0 && len(c.queue) == cap(c.queue) {
				compacted = true
			}
			c.submit(&Work{ctx: ctx, opSpec: opSpec{bytes: issued}})
			issued++
		}
	}
	pop := func(n int) {
		for range n {
			w, _ := c.pop(nil)
			if w == nil {
				t.Fatalf("queue empty after %d of %d operations", taken, issued)
			}
			if w.bytes != taken {
				t.Fatalf("operation %d came out as number %d", w.bytes, taken)
			}
			taken++
		}
	}
	for _, n := range []int{1, 7, 3, 64, 2, 300, 5, 1500, 1, 33} {
		push(n)
		pop((issued - taken + 1) / 2) // leave about half queued
	}
	pop(issued - taken)
	if w, _ := c.pop(nil); w != nil {
		t.Fatalf("operation %d left over", w.bytes)
	}
	if !compacted {
		t.Fatal("the pattern never filled a queue with taken operations in it; the test does not cover compaction")
	}
	if c.qhead != 0 || len(c.queue) != 0 || cap(c.queue) > maxIdleQueue {
		t.Fatalf("empty queue keeps head %d, len %d, cap %d (max idle %d)", c.qhead, len(c.queue), cap(c.queue), maxIdleQueue)
	}
	push(maxIdleQueue + 1)
	pop(maxIdleQueue + 1)
	if cap(c.queue) != 0 {
		t.Fatalf("an emptied queue of %d kept its array (cap %d)", maxIdleQueue+1, cap(c.queue))
	}
}
