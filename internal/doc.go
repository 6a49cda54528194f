// Package internal is part of redkit.
package internal
