package layoutstats

import (
	"slices"
	"time"
)

// A sweep must find the keys idle for longer than IdleTimeout and the
// intervals older than StaleAfter. Scanning every key for them cost a
// visit per remembered key per sweep (hundreds of thousands of keys at
// the twin's scale, nearly none of them due), so the keys are kept in two
// intrusive lists instead: by lastSeen, and (those whose interval counts)
// by contribAt. Reports arrive with a now that does not go back, so
// moving a key to a list's tail keeps the list sorted and a sweep walks
// only the due keys from the head. When that does not hold — a now
// earlier than the tail's, or a rollback, which restores keys' times
// without their places — the lists are marked unsorted and rebuilt by
// sorting at the next sweep; the set of keys a sweep handles is the same
// either way.

// keyList is one intrusive list of stripe states; which links it uses
// is fixed by its field index (0: lastSeen, 1: contribAt).
type keyList struct {
	head, tail *stripeState
	which      int
}

// stripeLinks are a stripe state's places in the two lists.
type stripeLinks struct {
	prev, next *stripeState
	in         bool
}

func (l *keyList) links(st *stripeState) *stripeLinks { return &st.links[l.which] }

func (l *keyList) remove(st *stripeState) {
	k := l.links(st)
	if !k.in {
		return
	}
	if k.prev != nil {
		l.links(k.prev).next = k.next
	} else {
		l.head = k.next
	}
	if k.next != nil {
		l.links(k.next).prev = k.prev
	} else {
		l.tail = k.prev
	}
	*k = stripeLinks{}
}

func (l *keyList) pushBack(st *stripeState) {
	k := l.links(st)
	*k = stripeLinks{prev: l.tail, in: true}
	if l.tail != nil {
		l.links(l.tail).next = st
	} else {
		l.head = st
	}
	l.tail = st
}

func (l *keyList) reset() { l.head, l.tail = nil, nil }

// listTime is the time a list is sorted by.
func listTime(which int, st *stripeState) time.Time {
	if which == 0 {
		return st.lastSeen
	}
	return st.contribAt
}

// moveToBack puts st at the tail of l, which it now sorts last in; a time
// before the old tail's leaves the lists unsorted until the next sweep.
func (in *Ingester) moveToBack(l *keyList, st *stripeState) {
	if in.unsorted {
		return
	}
	l.remove(st)
	if l.tail != nil && listTime(l.which, st).Before(listTime(l.which, l.tail)) {
		in.unsorted = true
		return
	}
	l.pushBack(st)
}

// seen sets st's lastSeen.
func (in *Ingester) seen(st *stripeState, now time.Time) {
	st.lastSeen = now
	in.moveToBack(&in.bySeen, st)
}

// sortLists rebuilds both lists from the keys, sorted by their times.
func (in *Ingester) sortLists() {
	all := make([]*stripeState, 0, len(in.keys))
	for key, st := range in.keys {
		st.key = key
		all = append(all, st)
	}
	for which, l := range []*keyList{&in.bySeen, &in.byContrib} {
		l.reset()
		slices.SortFunc(all, func(a, b *stripeState) int {
			return listTime(which, a).Compare(listTime(which, b))
		})
		for _, st := range all {
			st.links[which] = stripeLinks{}
			if which == 0 || !st.contribAt.IsZero() {
				l.pushBack(st)
			}
		}
	}
	in.unsorted = false
}
