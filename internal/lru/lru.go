// Package lru is a cache bounded by the bytes of what it keeps: the least
// recently used entries go first. It is not safe for concurrent use; its
// callers hold their own lock. It knows nothing of what it keeps.
package lru

import "container/list"

// Cache keeps values of K up to max bytes in all, as their sizes are given.
type Cache[K comparable, V any] struct {
	max, size int64
	items     map[K]*list.Element // of *entry[K, V]
	order     *list.List          // most recent first
}

type entry[K comparable, V any] struct {
	key  K
	val  V
	size int64
}

// New returns an empty cache of at most max bytes.
func New[K comparable, V any](max int64) *Cache[K, V] {
	return &Cache[K, V]{max: max, items: map[K]*list.Element{}, order: list.New()}
}

// Get returns the value of k and marks it used.
func (c *Cache[K, V]) Get(k K) (V, bool) {
	e, ok := c.items[k]
	if !ok {
		var zero V
		return zero, false
	}
	c.order.MoveToFront(e)
	return e.Value.(*entry[K, V]).val, true
}

// Has reports whether k is kept, without marking it used.
func (c *Cache[K, V]) Has(k K) bool {
	_, ok := c.items[k]
	return ok
}

// Add keeps v, of size bytes, as k's value, and drops the least recently
// used values until the cache fits. A value larger than a quarter of the
// cache is not kept (it would push out many smaller ones), nor is a key
// already there.
func (c *Cache[K, V]) Add(k K, v V, size int64) {
	if size > c.max/4 {
		return
	}
	if _, ok := c.items[k]; ok {
		return
	}
	c.items[k] = c.order.PushFront(&entry[K, V]{key: k, val: v, size: size})
	c.size += size
	for c.size > c.max {
		old := c.order.Remove(c.order.Back()).(*entry[K, V])
		delete(c.items, old.key)
		c.size -= old.size
	}
}

// Clear drops every value.
func (c *Cache[K, V]) Clear() {
	clear(c.items)
	c.order.Init()
	c.size = 0
}

// Len is the number of values kept.
func (c *Cache[K, V]) Len() int { return len(c.items) }
