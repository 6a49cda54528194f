// Package idgen is part of redkit.
package idgen
