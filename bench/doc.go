// Package bench is part of redkit.
package bench
