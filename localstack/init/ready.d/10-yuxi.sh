#!/bin/bash
# LocalStack ready hook: the AWS wiring of terraform/aws, created with the AWS
# CLI (awslocal) — the event bus, one rule and SQS queue (with a DLQ) per
# consuming function, the functions from make build-lambda's zips, their
# event source mappings with partial batch failures, the intake Function URL
# (response streaming), the objects bucket's notifications to doc-parse's
# queue, and the dispatcher's sweep schedule. tests/localstack checks every
# call's command, options and the names it references.
set -euo pipefail

REGION=us-east-1
ACCOUNT=000000000000
BUS=yuxi-events
SOURCE=yuxi.outbox
BUCKET=yuxi-objects
ZIPS=/opt/yuxi/lambda
ROLE=arn:aws:iam::${ACCOUNT}:role/yuxi-lambda
ENDPOINT=http://localhost.localstack.cloud:4566

FUNCTIONS="intake dispatcher agent-step tool-invoke doc-parse kb-index kb-graph evaluate"

ENV_JSON="{\"Variables\":{\"DATABASE_URL\":\"${YUXI_DATABASE_URL}\",\"REDIS_URL\":\"${YUXI_REDIS_URL}\",\"YUXI_RELAY\":\"eventbridge\",\"YUXI_EVENTBRIDGE_BUS\":\"${BUS}\",\"YUXI_AWS_ENDPOINT\":\"${ENDPOINT}\",\"YUXI_BLOB_URI\":\"s3://${BUCKET}/objects?endpoint=localhost.localstack.cloud:4566&ssl=false\",\"YUXI_CREATE_DATABASE\":\"true\"}}"

awslocal iam create-role --role-name yuxi-lambda \
  --assume-role-policy-document '{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"lambda.amazonaws.com"},"Action":"sts:AssumeRole"}]}'

awslocal events create-event-bus --name "${BUS}"
awslocal s3api create-bucket --bucket "${BUCKET}"

for fn in ${FUNCTIONS}; do
  awslocal lambda create-function --function-name "yuxi-${fn}" \
    --runtime provided.al2023 --architectures arm64 --handler bootstrap \
    --zip-file "fileb://${ZIPS}/${fn}.zip" --role "${ROLE}" \
    --timeout 600 --memory-size 1024 --environment "${ENV_JSON}"
  awslocal lambda wait function-active-v2 --function-name "yuxi-${fn}"
done

awslocal lambda create-function-url-config --function-name yuxi-intake \
  --auth-type NONE --invoke-mode RESPONSE_STREAM

# consumer:event types (the Knative Triggers of knative/500-triggers.yaml).
CONSUMERS="agent-step:io.yuxi.agent.step.ready.v1
tool-invoke:io.yuxi.tool.call.requested.v1
dispatcher:io.yuxi.run.finished.v1,io.yuxi.dispatcher.sweep.requested.v1
doc-parse:io.yuxi.document.uploaded.v1,io.yuxi.bucket.object.changed.v1
kb-index:io.yuxi.document.parsed.v1
kb-graph:io.yuxi.document.indexed.v1
evaluate:io.yuxi.evaluation.batch.ready.v1,io.yuxi.evaluation.dataset.batch.ready.v1,io.yuxi.evaluation.tick.v1,io.yuxi.evaluation.regressed.v1"

for line in ${CONSUMERS}; do
  fn=${line%%:*}
  types=${line#*:}
  awslocal sqs create-queue --queue-name "yuxi-${fn}-dlq"
  dlq_arn="arn:aws:sqs:${REGION}:${ACCOUNT}:yuxi-${fn}-dlq"
  awslocal sqs create-queue --queue-name "yuxi-${fn}" \
    --attributes "{\"VisibilityTimeout\":\"3600\",\"RedrivePolicy\":\"{\\\"deadLetterTargetArn\\\":\\\"${dlq_arn}\\\",\\\"maxReceiveCount\\\":\\\"5\\\"}\"}"
  queue_arn="arn:aws:sqs:${REGION}:${ACCOUNT}:yuxi-${fn}"
  pattern="{\"source\":[\"${SOURCE}\"],\"detail-type\":[\"${types//,/\",\"}\"]}"
  awslocal events put-rule --name "yuxi-${fn}" --event-bus-name "${BUS}" --event-pattern "${pattern}"
  awslocal events put-targets --rule "yuxi-${fn}" --event-bus-name "${BUS}" --targets "Id=queue,Arn=${queue_arn}"
  awslocal lambda create-event-source-mapping --function-name "yuxi-${fn}" \
    --event-source-arn "${queue_arn}" --batch-size 10 --function-response-types ReportBatchItemFailures
done

awslocal s3api put-bucket-notification-configuration --bucket "${BUCKET}" \
  --notification-configuration "{\"QueueConfigurations\":[{\"QueueArn\":\"arn:aws:sqs:${REGION}:${ACCOUNT}:yuxi-doc-parse\",\"Events\":[\"s3:ObjectCreated:*\",\"s3:ObjectRemoved:*\"],\"Filter\":{\"Key\":{\"FilterRules\":[{\"Name\":\"prefix\",\"Value\":\"sources/\"}]}}}]}"

awslocal scheduler create-schedule --name yuxi-dispatcher-sweep \
  --schedule-expression 'rate(1 minute)' --flexible-time-window '{"Mode":"OFF"}' \
  --target "{\"Arn\":\"arn:aws:lambda:${REGION}:${ACCOUNT}:function:yuxi-dispatcher\",\"RoleArn\":\"${ROLE}\",\"Input\":\"{\\\"specversion\\\":\\\"1.0\\\",\\\"type\\\":\\\"io.yuxi.dispatcher.sweep.requested.v1\\\",\\\"source\\\":\\\"<aws.scheduler.schedule-arn>\\\",\\\"id\\\":\\\"<aws.scheduler.execution-id>\\\",\\\"data\\\":{\\\"reason\\\":\\\"schedule\\\"}}\"}"

echo "yuxi: LocalStack wiring ready; intake at $(awslocal lambda get-function-url-config --function-name yuxi-intake --query FunctionUrl --output text)"
