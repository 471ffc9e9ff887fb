//go:build !race

package sqlite

// hugeRows is the usage table TestUsageOfAHugeTableIsBounded reads.
const hugeRows = 300_000
