// Package wallet is part of redkit.
package wallet
