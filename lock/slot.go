package lock

import (
	"strconv"
	"sync"
)

// MaxFenceCounters bounds the fence counters a key prefix keeps in Redis:
// one per Redis Cluster hash slot, shared by every lock name whose keys
// live in that slot, on a single server as on a Cluster. They are the only
// keys the package keeps without an expiry (Redlock keeps the same on each
// of its masters), about 80 bytes each, so at most about 1.3 MB per prefix
// however many names are ever locked.
const MaxFenceCounters = 16384

// counterTags maps each hash slot to the hash tag of its fence counter: the
// smallest decimal number whose slot it is. The mapping is fixed forever
// (a different tag for a slot would start its tokens again), and a number
// never collides with a lock key, whose kind and name follow the tag.
var counterTags = sync.OnceValue(func() *[MaxFenceCounters]string {
	var tags [MaxFenceCounters]string
	left := MaxFenceCounters
	for i := 0; left > 0; i++ {
		s := strconv.Itoa(i)
		if slot := hashSlot(s); tags[slot] == "" {
			tags[slot] = s
			left--
		}
	}
	return &tags
})

// counterTag returns the hash tag of the fence counter shared by the lock
// names of group (a name's slot group, its keys' hash tag).
func counterTag(group string) string { return counterTags()[hashSlot(group)] }

// hashSlot is Redis Cluster's slot of a hash tag: CRC16 (XMODEM) mod 16384.
func hashSlot(tag string) int {
	var crc uint16
	for i := 0; i < len(tag); i++ {
		crc = crc<<8 ^ crc16tab[byte(crc>>8)^tag[i]]
	}
	return int(crc) & (MaxFenceCounters - 1)
}

var crc16tab = func() (t [256]uint16) {
	for i := range t {
		crc := uint16(i) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
		t[i] = crc
	}
	return t
}()
