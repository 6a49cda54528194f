// Package lock is part of redkit.
package lock
