package main

import (
	"net/http"
	"time"
)

var probeClient = &http.Client{Timeout: time.Second}

func probe(url string) bool {
	resp, err := probeClient.Get(url)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}
