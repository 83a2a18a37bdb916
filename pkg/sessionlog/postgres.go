package sessionlog

import (
	"context"
	"errors"
)

// OpenPostgres opens the PostgreSQL session log. Not yet implemented (issue 3, step 3).
func OpenPostgres(ctx context.Context, url string) (Store, error) {
	return nil, errors.New("postgres session log: not implemented yet")
}
