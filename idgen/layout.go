package idgen

// The Snowflake layout, identical to github.com/bwmarrin/snowflake's defaults:
// 1 unused sign bit, 41 bits of milliseconds since Epoch, 10 bits of node, 12
// bits of sequence.
const (
	// Epoch is the Snowflake epoch in Unix milliseconds (2010-11-04 01:42:54.657 UTC),
	// bwmarrin/snowflake's (and Twitter's) default.
	Epoch int64 = 1288834974657
	// MaxNode is the highest node ID.
	MaxNode int64 = 1<<nodeBits - 1

	nodeBits  = 10
	stepBits  = 12
	maxStep   = 1<<stepBits - 1
	nodeShift = stepBits
	timeShift = nodeBits + stepBits
	maxMillis = 1<<41 - 1
)
