package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/omniroute/gateway/internal/store"
	"github.com/omniroute/gateway/internal/tenantpolicy"
)

// codeConstraint is SQLite's constraint violation.
const codeConstraint = 19

func millis(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func fromMillis(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

// CreateKey implements store.KeyStore.
func (d *DB) CreateKey(ctx context.Context, k store.Key) error {
	pol, err := json.Marshal(k.Policy)
	if err != nil {
		return fmt.Errorf("encoding the policy of key %q: %w", k.Name, err)
	}
	_, err = d.db.ExecContext(ctx, `INSERT INTO keys(name, tenant_id, key_hash, policy, created_at) VALUES(?,?,?,?,?)`,
		k.Name, k.TenantID, k.KeyHash, string(pol), millis(k.CreatedAt))
	if Code(err) == codeConstraint {
		var taken int
		if d.db.QueryRowContext(ctx, `SELECT count(*) FROM keys WHERE name = ?`, k.Name).Scan(&taken) == nil && taken > 0 {
			return store.ErrDuplicateName
		}
		return fmt.Errorf("key %q collides with another key's hash or tenant id; generate a new secret: %w", k.Name, err)
	}
	if err != nil {
		return describe(d.path, "write a key to", err)
	}
	return nil
}

// Keys implements store.KeyStore.
func (d *DB) Keys(ctx context.Context) ([]store.Key, error) {
	type keyRow struct {
		k                         store.Key
		pol                       string
		created, rotated, revoked int64
	}
	rows, err := queryRows(ctx, d, "read keys from", `SELECT name, tenant_id, key_hash, policy, created_at, rotated_at, revoked_at FROM keys ORDER BY name`, nil,
		func(rows *sql.Rows, r *keyRow) error {
			return rows.Scan(&r.k.Name, &r.k.TenantID, &r.k.KeyHash, &r.pol, &r.created, &r.rotated, &r.revoked)
		})
	if err != nil {
		return nil, err
	}
	// The policies are decoded once every row is read: a bad one is the
	// operator's to fix, not a read failure (describe).
	var out []store.Key
	for i := range rows {
		r := &rows[i]
		p, err := tenantpolicy.Decode([]byte(r.pol))
		if err != nil {
			return nil, fmt.Errorf("database %s: key %q has an invalid policy (%v); fix it with the key API or in the database", d.path, r.k.Name, err)
		}
		k := r.k
		k.Policy = p
		k.CreatedAt, k.RotatedAt, k.RevokedAt = fromMillis(r.created), fromMillis(r.rotated), fromMillis(r.revoked)
		out = append(out, k)
	}
	return out, nil
}

// change runs an update of one active key.
func (d *DB) change(ctx context.Context, name, query string, args ...any) error {
	const doing = "change a key in"
	return d.inTx(ctx, doing, func(tx *sql.Tx) error {
		var revoked int64
		switch err := tx.QueryRowContext(ctx, `SELECT revoked_at FROM keys WHERE name = ?`, name).Scan(&revoked); {
		case errors.Is(err, sql.ErrNoRows):
			return store.ErrNotFound
		case err != nil:
			return describe(d.path, doing, err)
		case revoked != 0:
			return store.ErrRevoked
		}
		if _, err := tx.ExecContext(ctx, query, append(args, name)...); err != nil {
			if Code(err) == codeConstraint {
				return fmt.Errorf("key %q: the new hash collides with another key's; generate a new secret: %w", name, err)
			}
			return describe(d.path, doing, err)
		}
		return nil
	})
}

// UpdatePolicy implements store.KeyStore.
func (d *DB) UpdatePolicy(ctx context.Context, name string, p tenantpolicy.Policy) error {
	pol, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("encoding the policy of key %q: %w", name, err)
	}
	return d.change(ctx, name, `UPDATE keys SET policy = ? WHERE name = ?`, string(pol))
}

// RotateKey implements store.KeyStore.
func (d *DB) RotateKey(ctx context.Context, name, keyHash string, at time.Time) error {
	return d.change(ctx, name, `UPDATE keys SET key_hash = ?, rotated_at = ? WHERE name = ?`, keyHash, millis(at))
}

// RevokeKey implements store.KeyStore.
func (d *DB) RevokeKey(ctx context.Context, name string, at time.Time) error {
	return d.change(ctx, name, `UPDATE keys SET revoked_at = ? WHERE name = ?`, max(millis(at), 1))
}
