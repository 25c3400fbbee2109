package vap

import (
	"reflect"
	"testing"
)

func TestDropsZero(t *testing.T) {
	for _, c := range []struct {
		typ  reflect.Type
		path []string
		want bool
	}{
		{podType, []string{"spec", "hostNetwork"}, true},
		{podType, []string{"spec", "priorityClassName"}, true},
		{podType, []string{"spec", "runtimeClassName"}, false}, // *string
		{podType, []string{"spec", "automountServiceAccountToken"}, false},
		{podType, []string{"spec", "securityContext", "runAsNonRoot"}, false},
		{containerType, []string{"securityContext", "allowPrivilegeEscalation"}, false},
		{containerType, []string{"workingDir"}, true},
		{serviceType, []string{"spec", "externalName"}, true},
		{podType, []string{"spec", "noSuchField"}, false},
	} {
		if got := dropsZero(c.typ, c.path); got != c.want {
			t.Errorf("dropsZero(%s, %v) = %v, want %v", c.typ, c.path, got, c.want)
		}
	}
}
