// Package examples is part of redkit.
package examples
