// Package stock is part of redkit.
package stock
