// Package certs is podpatch's TLS serving: hardened TLS options for
// controller-runtime's webhook server (which reloads tls.crt and tls.key from
// its CertDir when they change), one-shot generation of a CA and a serving
// certificate for a Service, atomic writing of that material to a directory,
// and a self-signed mode that keeps a CA and a serving certificate in a
// Secret, injects the CA bundle into podpatch's webhook configurations (by
// server-side apply of only their caBundle fields) and rotates both before
// they expire.
//
// Certificates are built with cert-manager's pkg/util/pki, so podpatch signs
// the same way cert-manager does; this is the only non-test package that
// imports cert-manager.
package certs
