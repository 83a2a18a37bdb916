package sessionlog

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
)

// OwnerClaim is one claim of ClaimOwners: owner claims the log of SessionID.
type OwnerClaim struct {
	SessionID string
	Owner     Owner
}

// claimChunk bounds how many claims one transaction of ClaimOwners writes, so that an agent's
// append waiting for the write lock (SQLite) or a session's row (PostgreSQL) waits for a few
// thousand rows at most, not for every session at once.
const claimChunk = 1000

// byLog orders claims by session ID, so two writers claiming overlapping logs lock their rows
// in the same order (no deadlock on PostgreSQL); the result keeps the callers' order.
func byLog(claims []OwnerClaim) []int {
	idx := make([]int, len(claims))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(claims[a].SessionID, claims[b].SessionID) })
	return idx
}

func validClaims(claims []OwnerClaim) error {
	for _, c := range claims {
		if err := validOwner(c.SessionID, c.Owner); err != nil {
			return err
		}
	}
	return nil
}

// inChunks validates claims, then has write claim them a chunk at a time in session-ID order,
// each chunk given as indices into claims, setting held at those indices.
func inChunks(claims []OwnerClaim, write func(idx []int, held []Owner) error) ([]Owner, error) {
	if err := validClaims(claims); err != nil {
		return nil, err
	}
	held := make([]Owner, len(claims))
	for idx := byLog(claims); len(idx) > 0; {
		n := min(len(idx), claimChunk)
		if err := write(idx[:n], held); err != nil {
			return nil, fmt.Errorf("claim %d sessions: %w", len(claims), err)
		}
		idx = idx[n:]
	}
	return held, nil
}

func (s *sqliteStore) ClaimOwners(ctx context.Context, claims []OwnerClaim) ([]Owner, error) {
	return inChunks(claims, func(idx []int, held []Owner) error {
		// inChunks names the claims in its errors.
		return s.inTx(ctx, "", func(ctx context.Context, tx *sql.Tx) error {
			now, c := nowMillis(), s.claimsIn(ctx, tx)
			for _, i := range idx {
				got, err := c.claim(ctx, claims[i].SessionID, claims[i].Owner, now)
				if err != nil {
					return err
				}
				held[i] = got
			}
			return nil
		})
	})
}

func (s *postgresStore) ClaimOwners(ctx context.Context, claims []OwnerClaim) ([]Owner, error) {
	return inChunks(claims, func(idx []int, held []Owner) error { return s.claimChunk(ctx, claims, idx, held) })
}

// claimChunk writes the claims idx names in one transaction sent as one batch (one round trip),
// each with the read of the owner that holds the log after it, into held.
func (s *postgresStore) claimChunk(ctx context.Context, claims []OwnerClaim, idx []int, held []Owner) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	var b pgx.Batch
	b.Queue(`BEGIN`)
	b.Queue(s.boundWriteTx)
	now := nowMillis()
	for _, i := range idx {
		c, got := claims[i], &held[i]
		b.Queue(postgresClaimOwner, c.SessionID, c.Owner.Namespace, c.Owner.Name, c.Owner.UID, now)
		b.Queue(postgresReadOwner, c.SessionID).QueryRow(func(row pgx.Row) error {
			return row.Scan(&got.Namespace, &got.Name, &got.UID)
		})
	}
	b.Queue(`COMMIT`)
	if err := conn.SendBatch(ctx, &b).Close(); err != nil {
		pgRollback(conn.Conn())
		return err
	}
	return nil
}

func (s *postgresReadOnlyStore) ClaimOwners(_ context.Context, claims []OwnerClaim) ([]Owner, error) {
	return nil, s.refuse(fmt.Sprintf("claim %d sessions", len(claims)))
}

func (s *reopeningSQLite) ClaimOwners(ctx context.Context, claims []OwnerClaim) ([]Owner, error) {
	return reopenCall(ctx, s, func(c *sqliteStore) ([]Owner, error) { return c.ClaimOwners(ctx, claims) })
}

func (d *deadlineStore) ClaimOwners(ctx context.Context, claims []OwnerClaim) ([]Owner, error) {
	return bounded(ctx, d, "ClaimOwners", func(ctx context.Context) ([]Owner, error) { return d.s.ClaimOwners(ctx, claims) })
}
