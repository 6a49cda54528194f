package redistest

import (
	"fmt"
	"strings"
)

// HashTag returns the part of key that Redis Cluster hashes: the bytes
// between the first '{' and the next '}' when there is at least one byte
// between them, otherwise the whole key.
func HashTag(key string) string {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			return key[i+1 : i+1+j]
		}
	}
	return key
}

// KeySlot returns the Redis Cluster slot of key: CRC16-CCITT (XModem) of its
// hash tag, modulo 16384, as CLUSTER KEYSLOT computes it. Tests use it to
// check that caller data cannot move a key to another slot.
func KeySlot(key string) int {
	var crc uint16
	for _, b := range []byte(HashTag(key)) {
		crc ^= uint16(b) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % 16384
}

// CheckKeyTag returns an error unless key contains exactly one '{' and one
// '}', in that order, enclosing tag, so that the key hashes to tag's slot
// and matches no other group's keys.
func CheckKeyTag(key, tag string) error {
	if strings.Count(key, "{") != 1 || strings.Count(key, "}") != 1 {
		return fmt.Errorf("key %q has more than the one hash tag {%s}", key, tag)
	}
	if got := HashTag(key); got != tag {
		return fmt.Errorf("key %q has hash tag {%s}, want {%s}", key, got, tag)
	}
	return nil
}
