output "api_url" {
  value       = google_cloud_run_v2_service.fn["intake"].uri
  description = "The intake API."
}

output "web_url" {
  value       = "https://storage.googleapis.com/${google_storage_bucket.web.name}/index.html"
  description = "The web UI (upload with gcloud storage rsync, see README)."
}

output "topics" {
  value = { for k, t in google_pubsub_topic.consumer : k => t.id }
}
