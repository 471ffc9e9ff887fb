//go:build race

package sqlite

// hugeRows is the usage table TestUsageOfAHugeTableIsBounded reads: the
// race detector makes the SQLite translation about a hundred times
// slower, so it reads a smaller one (still far above a page; the bound
// asserted is the page's, not the table's).
const hugeRows = 20_000
