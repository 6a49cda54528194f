// Package reliability is redkit's cross-module robustness suite: random
// workloads against lock, stock and wallet under injected faults, with the
// histories checked for linearizability and invariants.
package reliability
