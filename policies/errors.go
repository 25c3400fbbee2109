package policies

import "errors"

// The errors Apply returns (wrapped), at the bottom of the engine: the merge stops with
// ErrStopped, and every stage above reads them.

// ErrStopped is returned (wrapped) by Apply when Input.Done closed before it finished.
var ErrStopped = errors.New("stopped: the request budget ran out")

// ErrNamespaceMismatch is returned (wrapped) by Apply for an object whose metadata.namespace is
// set and is not Input.Namespace: which namespace's policies apply would be ambiguous, so none
// do (reference §5).
var ErrNamespaceMismatch = errors.New("the object's metadata.namespace is not the request's namespace")

// ErrSelectionDiverges is returned (wrapped) when the labels policies set keep changing which
// policies match beyond MaxSelectionRounds: their selectors contradict each other. `lint`
// reports policy sets that can do this (lint.SelectionProblems).
var ErrSelectionDiverges = errors.New("the labels policies set keep changing which policies match")
