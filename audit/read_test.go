package audit

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/podpatch/podpatch/internal/kube"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"
)

// TestEachStreamsItems: a page is handed to the audit an item at a time as it arrives, not
// read whole first: the server sends the first item and waits until the audit has it before
// sending the rest (a page of 500 Pods of 1.5 MiB each would be 750 MiB held at once). The
// List's members may come in any order; the continue token of each page is followed.
func TestEachStreamsItems(t *testing.T) {
	first := make(chan struct{})
	pod := func(name string) string {
		return fmt.Sprintf(`{"metadata":{"name":%q,"annotations":{"a":%q}},"spec":{}}`, name, strings.Repeat("x", 1000))
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Query().Get("continue") {
		case "":
			require.Equal(t, "7", r.URL.Query().Get("limit"))
			fmt.Fprintf(w, `{"kind":"PodList","apiVersion":"v1","metadata":{"continue":"p2"},"items":[%s`, pod("a"))
			w.(http.Flusher).Flush()
			select {
			case <-first:
			case <-time.After(10 * time.Second):
				return // the client never saw the first item before the page ended: not streamed
			}
			fmt.Fprintf(w, `,%s]}`, pod("b"))
		case "p2": // metadata after the items
			fmt.Fprintf(w, `{"items":[%s],"kind":"PodList","metadata":{"continue":"p3","resourceVersion":"9"}}`, pod("c"))
		case "p3":
			fmt.Fprint(w, `{"kind":"PodList","items":null,"metadata":{}}`)
		}
	}))
	defer srv.Close()
	kit, err := kube.New(&rest.Config{Host: srv.URL})
	require.NoError(t, err)
	defer kit.Close()
	r, err := NewReader(kit)
	require.NoError(t, err)
	r.PageSize = 7

	var names []string
	err = r.Each(context.Background(), "pods", "", "", func(raw json.RawMessage) error {
		var m objectMeta
		require.NoError(t, json.Unmarshal(raw, &m))
		if names = append(names, m.Metadata.Name); len(names) == 1 {
			close(first)
		}
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b", "c"}, names)
}

// TestEachItemRefusesWhatIsNotAList: a body that is not a List is an error, not a silent end.
func TestEachItemRefusesWhatIsNotAList(t *testing.T) {
	for _, body := range []string{`[]`, `{"items":{}}`, `{"items":[{}`, `{"metadata":`, ``, `{"items":[1,2]`} {
		_, err := eachItem(strings.NewReader(body), func(json.RawMessage) error { return nil })
		require.Error(t, err, "%q", body)
	}
	n := 0
	cont, err := eachItem(strings.NewReader(`{"items":[{},{}],"metadata":{"continue":"x"}}`), func(json.RawMessage) error { n++; return nil })
	require.NoError(t, err)
	require.Equal(t, "x", cont)
	require.Equal(t, 2, n)
}
