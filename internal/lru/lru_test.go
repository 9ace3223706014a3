package lru

import "testing"

func TestCacheBytes(t *testing.T) {
	c := New[string, int](100)
	c.Add("a", 1, 20)
	c.Add("b", 2, 20)
	c.Add("big", 3, 26) // over a quarter: not kept
	if c.Has("big") {
		t.Fatal("a value over a quarter of the cache was kept")
	}
	c.Add("a", 9, 20) // already there: unchanged
	if v, ok := c.Get("a"); !ok || v != 1 {
		t.Fatalf("a = %d %v", v, ok)
	}
	// a is the most recent now; c, d, e push b out, then a.
	c.Add("c", 3, 20)
	c.Add("d", 4, 20)
	c.Add("e", 5, 25)
	if c.Has("b") || !c.Has("a") {
		t.Fatalf("b kept %v, a kept %v: want b out first", c.Has("b"), c.Has("a"))
	}
	c.Add("f", 6, 20)
	if c.Has("a") || c.size > 100 {
		t.Fatalf("a kept %v, size %d", c.Has("a"), c.size)
	}
}

func TestCacheClear(t *testing.T) {
	c := New[string, int](100)
	c.Add("a", 1, 20)
	c.Add("b", 2, 20)
	c.Clear()
	if c.Len() != 0 || c.size != 0 || c.Has("a") {
		t.Fatalf("after Clear: %d values, %d bytes", c.Len(), c.size)
	}
	for _, k := range []string{"c", "d", "e", "f", "g"} {
		c.Add(k, 0, 20)
	}
	if c.Len() != 5 || c.size != 100 {
		t.Fatalf("refilled: %d values, %d bytes, want 5 and 100", c.Len(), c.size)
	}
}
