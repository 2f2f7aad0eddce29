package faas

// Unexported pieces the black-box tests in package faas_test reach through.
var (
	StreamingHandler   = streamingHandler
	CloudEventFunction = cloudEventFunction
)
