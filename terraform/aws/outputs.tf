output "api_url" {
  value       = aws_lambda_function_url.intake.function_url
  description = "The intake API (Function URL, streaming)."
}

output "web_url" {
  value       = "https://${aws_cloudfront_distribution.web.domain_name}"
  description = "The web UI, with /api/* forwarded to intake."
}

output "web_upload" {
  value       = "aws s3 sync ${var.web_dir} s3://${aws_s3_bucket.web.bucket}/ --delete --exclude index.html --cache-control 'public, max-age=31536000, immutable' && aws s3 cp ${var.web_dir}/index.html s3://${aws_s3_bucket.web.bucket}/index.html --cache-control no-cache"
  description = "The command that uploads the built web UI."
}

output "event_bus" {
  value = aws_cloudwatch_event_bus.events.name
}

output "dead_letter_queues" {
  value = { for k, q in aws_sqs_queue.dlq : k => q.url }
}

output "account_id" {
  value = data.aws_caller_identity.current.account_id
}
