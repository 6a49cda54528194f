// Package otelx is part of redkit.
package otelx
