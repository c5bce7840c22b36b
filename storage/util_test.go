package storage

import (
	"io"
	"net/http"
)

func readAll(resp *http.Response) string {
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
