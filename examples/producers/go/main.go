// Publish one push request with amqp091-go: a persistent JSON message to the direct exchange
// `push`, routing key `request`, with publisher confirms, so the broker has it before this exits.
//
//	PUSH_AMQP_URL=amqp://guest:guest@127.0.0.1:5672/%2f go run . -id hello-go -user alice
//
// Modules: go mod tidy fetches github.com/rabbitmq/amqp091-go. Debian: apt install golang-go
// golang-github-rabbitmq-amqp091-go-dev, then GO111MODULE=off GOPATH=/usr/share/gocode go run .
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// pushRequest is the part of a push request this example sets (docs/schemas/push-request.schema.json).
type pushRequest struct {
	ID      string         `json:"id"`
	App     string         `json:"app"`
	To      map[string]any `json:"to"`
	Payload map[string]any `json:"payload"`
}

func main() {
	id := flag.String("id", "", "the request's id (a repeat within the dedupe window is sent once)")
	app := flag.String("app", "com.example.game", "the app's bundle id, as in the apps file")
	user := flag.String("user", "", "the user whose devices get the push")
	alert := flag.String("alert", "Hello from Go", "the alert text")
	flag.Parse()
	if *id == "" || *user == "" {
		fmt.Fprintln(os.Stderr, "publish: -id and -user are required")
		os.Exit(2)
	}
	url := os.Getenv("PUSH_AMQP_URL")
	if url == "" {
		url = "amqp://guest:guest@127.0.0.1:5672/%2f"
	}
	body, err := json.Marshal(pushRequest{
		ID:      *id,
		App:     *app,
		To:      map[string]any{"users": []string{*user}},
		Payload: map[string]any{"aps": map[string]any{"alert": *alert, "sound": "default"}},
	})
	if err != nil {
		fail("encode", err)
	}
	if err := publish(url, body); err != nil {
		fail("publish "+*id, err)
	}
	fmt.Println("published", *id)
}

func publish(url string, body []byte) error {
	connection, err := amqp.Dial(url)
	if err != nil {
		return err
	}
	defer connection.Close()
	channel, err := connection.Channel()
	if err != nil {
		return err
	}
	if err := channel.Confirm(false); err != nil {
		return err
	}
	// mandatory: an unroutable message comes back on NotifyReturn instead of vanishing.
	returned := channel.NotifyReturn(make(chan amqp.Return, 1))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	confirmation, err := channel.PublishWithDeferredConfirmWithContext(ctx, "push", "request", true, false, amqp.Publishing{
		ContentType:  "application/json",
		DeliveryMode: amqp.Persistent,
		Timestamp:    time.Now(),
		Body:         body,
	})
	if err != nil {
		return err
	}
	// Wait ends with the broker's ack, or false on a nack, a closed channel or the timeout.
	acked := confirmation.Wait()
	select {
	case r := <-returned:
		return fmt.Errorf("returned unroutable: %s", r.ReplyText)
	default:
	}
	if !acked {
		return fmt.Errorf("not confirmed within 10 s (a nack, the channel closed or no answer)")
	}
	return nil
}

func fail(what string, err error) {
	fmt.Fprintf(os.Stderr, "publish: %s: %v\n", what, err)
	os.Exit(1)
}
