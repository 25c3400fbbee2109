package kube

import (
	"os"
	"path/filepath"
	"testing"
)

// TestLoadConfigKubeconfigEnv: every command loads the client configuration as kubectl does
// (`podpatch check` once ignored $KUBECONFIG and tried the in-cluster configuration):
// $KUBECONFIG when no --kubeconfig is given, the flag first when it is, the context's
// namespace, and an unreadable file is an error naming the kubeconfig.
func TestLoadConfigKubeconfigEnv(t *testing.T) {
	dir := t.TempDir()
	write := func(name, server string) string {
		p := filepath.Join(dir, name)
		cfg := "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: " + server +
			"\ncontexts:\n- name: c\n  context:\n    cluster: c\n    namespace: team-a\n    user: u\ncurrent-context: c\nusers:\n- name: u\n  user:\n    token: t\n"
		if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	env := write("env.kubeconfig", "https://127.0.0.1:6443")
	flag := write("flag.kubeconfig", "https://127.0.0.2:6443")
	t.Setenv("KUBECONFIG", env)

	cfg, ns, err := LoadConfig("")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://127.0.0.1:6443" {
		t.Errorf("without --kubeconfig: host %q, want $KUBECONFIG's https://127.0.0.1:6443", cfg.Host)
	}
	if ns != "team-a" {
		t.Errorf("namespace %q, want the context's team-a", ns)
	}
	if cfg, _, err = LoadConfig(flag); err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://127.0.0.2:6443" {
		t.Errorf("with --kubeconfig: host %q, want the flag's https://127.0.0.2:6443", cfg.Host)
	}
	if _, _, err := LoadConfig(filepath.Join(dir, "absent")); err == nil {
		t.Error("an absent --kubeconfig file: no error")
	}
}
