data "google_project" "this" {}

locals {
  # Each consumer's topic; the relay routes every event type to its consumers' topics.
  topic_routes = join(",", flatten([for fn, types in var.consumers : [for t in types : "${t}=${google_pubsub_topic.consumer[fn].name}"]]))
  common_env = merge(var.function_env, {
    DATABASE_URL          = var.database_url
    REDIS_URL             = var.redis_url
    YUXI_JWT_SECRET       = var.jwt_secret
    YUXI_API_KEY_SECRET   = var.api_key_secret
    YUXI_RELAY            = "pubsub"
    YUXI_PUBSUB_PROJECT   = var.project
    YUXI_PUBSUB_TOPICS    = local.topic_routes
    YUXI_BLOB_URI         = "s3://${google_storage_bucket.objects.name}/objects?endpoint=storage.googleapis.com"
    YUXI_SSE_MAX_DURATION = "14m"
  }, local.sandbox_env)
  # The functions reach the provisioner at the VM's internal address through the VPC connector.
  sandbox_env = var.provisioner.enabled ? {
    SANDBOX_PROVISIONER_URL   = "http://${google_compute_instance.provisioner[0].network_interface[0].network_ip}:${local.provisioner_port}"
    SANDBOX_PROVISIONER_TOKEN = var.provisioner_token
  } : {}
  provisioner_port = 8002
  sandbox_volume   = "/var/lib/yuxi/sandbox"
  pubsub_agent     = "service-${data.google_project.this.number}@gcp-sa-pubsub.iam.gserviceaccount.com"
}

resource "google_project_service" "apis" {
  for_each           = toset(["run.googleapis.com", "pubsub.googleapis.com", "eventarc.googleapis.com", "cloudscheduler.googleapis.com", "compute.googleapis.com"])
  service            = each.value
  disable_on_destroy = false
}

# ---- identities ---------------------------------------------------------------

resource "google_service_account" "function" {
  for_each     = var.functions
  account_id   = "${var.name}-${each.key}"
  display_name = "Yuxi ${each.key}"
}

# Every function publishes its outbox to the consumers' topics.
resource "google_pubsub_topic_iam_member" "publish" {
  for_each = { for pair in setproduct(keys(var.functions), keys(var.consumers)) : "${pair[0]}/${pair[1]}" => { fn = pair[0], topic = pair[1] } }
  topic    = google_pubsub_topic.consumer[each.value.topic].name
  role     = "roles/pubsub.publisher"
  member   = "serviceAccount:${google_service_account.function[each.value.fn].email}"
}

resource "google_storage_bucket_iam_member" "objects" {
  for_each = var.functions
  bucket   = google_storage_bucket.objects.name
  role     = "roles/storage.objectUser"
  member   = "serviceAccount:${google_service_account.function[each.key].email}"
}

# The identity Eventarc pushes with, allowed to invoke the consumers only.
resource "google_service_account" "eventarc" {
  account_id   = "${var.name}-eventarc"
  display_name = "Yuxi Eventarc triggers"
}

resource "google_project_iam_member" "eventarc_receiver" {
  project = var.project
  role    = "roles/eventarc.eventReceiver"
  member  = "serviceAccount:${google_service_account.eventarc.email}"
}

resource "google_cloud_run_v2_service_iam_member" "eventarc_invoker" {
  for_each = var.consumers
  name     = google_cloud_run_v2_service.fn[each.key].name
  location = var.region
  role     = "roles/run.invoker"
  member   = "serviceAccount:${google_service_account.eventarc.email}"
}

resource "google_project_iam_member" "pubsub_token_creator" {
  project = var.project
  role    = "roles/iam.serviceAccountTokenCreator"
  member  = "serviceAccount:${local.pubsub_agent}"
}

# ---- functions ----------------------------------------------------------------

resource "google_cloud_run_v2_service" "fn" {
  for_each            = var.functions
  name                = "${var.name}-${each.key}"
  location            = var.region
  ingress             = each.key == "intake" ? "INGRESS_TRAFFIC_ALL" : "INGRESS_TRAFFIC_INTERNAL_ONLY"
  deletion_protection = false

  template {
    service_account = google_service_account.function[each.key].email
    timeout         = "${each.value.timeout}s"
    scaling {
      min_instance_count = 0
      max_instance_count = 20
    }
    dynamic "vpc_access" {
      for_each = var.vpc_connector != "" ? [1] : []
      content {
        connector = var.vpc_connector
        egress    = "PRIVATE_RANGES_ONLY"
      }
    }
    containers {
      image = "${var.image}:${each.key}"
      resources {
        limits = {
          memory = each.value.memory
          cpu    = "1"
        }
      }
      dynamic "env" {
        for_each = local.common_env
        content {
          name  = env.key
          value = env.value
        }
      }
    }
  }
  depends_on = [google_project_service.apis]
}

resource "google_cloud_run_v2_service_iam_member" "intake_public" {
  name     = google_cloud_run_v2_service.fn["intake"].name
  location = var.region
  role     = "roles/run.invoker"
  member   = "allUsers"
}

# ---- events: topic per consumer → Eventarc trigger → Cloud Run ---------------

resource "google_pubsub_topic" "consumer" {
  for_each = var.consumers
  name     = "${var.name}-${each.key}"
}

resource "google_pubsub_topic" "dead_letter" {
  name = "${var.name}-dead-letter"
}

resource "google_eventarc_trigger" "consumer" {
  for_each        = var.consumers
  name            = "${var.name}-${each.key}"
  location        = var.region
  service_account = google_service_account.eventarc.email
  matching_criteria {
    attribute = "type"
    value     = "google.cloud.pubsub.topic.v1.messagePublished"
  }
  transport {
    pubsub {
      topic = google_pubsub_topic.consumer[each.key].id
    }
  }
  destination {
    cloud_run_service {
      service = google_cloud_run_v2_service.fn[each.key].name
      region  = var.region
    }
  }
}

# ---- schedules: Cloud Scheduler → the consumer's topic, ce-type attribute ----

resource "google_cloud_scheduler_job" "tick" {
  for_each = var.schedules
  name     = "${var.name}-${each.key}"
  region   = var.region
  schedule = each.value.schedule
  pubsub_target {
    topic_name = google_pubsub_topic.consumer[each.value.function].id
    data       = base64encode(jsonencode({ reason = "schedule" }))
    attributes = {
      "ce-type"      = each.value.event_type
      "content-type" = "application/json"
    }
  }
  depends_on = [google_project_service.apis]
}

# ---- object store and its notifications → doc-parse ---------------------------

resource "google_storage_bucket" "objects" {
  name                        = "${var.project}-${var.name}-objects"
  location                    = var.region
  uniform_bucket_level_access = true
}

data "google_storage_project_service_account" "gcs" {}

resource "google_project_iam_member" "gcs_pubsub" {
  project = var.project
  role    = "roles/pubsub.publisher"
  member  = "serviceAccount:${data.google_storage_project_service_account.gcs.email_address}"
}

resource "google_eventarc_trigger" "objects" {
  for_each        = toset(["google.cloud.storage.object.v1.finalized", "google.cloud.storage.object.v1.deleted"])
  name            = "${var.name}-doc-parse-${replace(each.value, ".", "-")}"
  location        = var.region
  service_account = google_service_account.eventarc.email
  matching_criteria {
    attribute = "type"
    value     = each.value
  }
  matching_criteria {
    attribute = "bucket"
    value     = google_storage_bucket.objects.name
  }
  destination {
    cloud_run_service {
      service = google_cloud_run_v2_service.fn["doc-parse"].name
      region  = var.region
    }
  }
  depends_on = [google_project_iam_member.gcs_pubsub]
}

# ---- sandbox provisioner: docker backend on one VM ---------------------------

resource "google_compute_instance" "provisioner" {
  count        = var.provisioner.enabled ? 1 : 0
  name         = "${var.name}-provisioner"
  machine_type = var.provisioner.machine_type
  zone         = var.provisioner.zone != "" ? var.provisioner.zone : "${var.region}-b"
  tags         = ["${var.name}-provisioner"]
  boot_disk {
    initialize_params {
      image = "cos-cloud/cos-stable"
      size  = 50
    }
  }
  network_interface {
    network = var.provisioner.network
  }
  # Container-Optimized OS runs the declared container as root with the
  # engine's socket and the volume (the sandboxes are sibling containers
  # mounting the same host folder). The sandbox image is pulled first.
  metadata = {
    "gce-container-declaration" = yamlencode({
      spec = {
        containers = [{
          image = var.provisioner.image
          env = [
            { name = "PROVISIONER_BACKEND", value = "docker" },
            { name = "SANDBOX_PROVISIONER_TOKEN", value = var.provisioner_token },
            { name = "SANDBOX_IMAGE", value = var.provisioner.sandbox_image },
            { name = "SANDBOX_VOLUME_DIR", value = local.sandbox_volume },
            { name = "DOCKER_THREADS_HOST_PATH", value = local.sandbox_volume },
            { name = "PORT", value = tostring(local.provisioner_port) },
          ]
          securityContext = { runAsUser = 0 }
          volumeMounts = [
            { name = "docker", mountPath = "/var/run/docker.sock" },
            { name = "volume", mountPath = local.sandbox_volume },
          ]
        }]
        volumes = [
          { name = "docker", hostPath = { path = "/var/run/docker.sock" } },
          { name = "volume", hostPath = { path = local.sandbox_volume } },
        ]
        restartPolicy = "Always"
      }
    })
    # COS: credentials for the sandbox image's registry (Artifact Registry through the VM's service account), then pull it.
    startup-script = <<-EOT
      export HOME=/var/lib/yuxi && mkdir -p "$HOME"
      docker-credential-gcr configure-docker --registries=${split("/", var.provisioner.sandbox_image)[0]} || true
      docker pull '${var.provisioner.sandbox_image}'
    EOT
  }
  service_account {
    email  = google_service_account.function["tool-invoke"].email
    scopes = ["cloud-platform"]
  }
}

# Only the VPC connector's range reaches the provisioner's port.
resource "google_compute_firewall" "provisioner" {
  count         = var.provisioner.enabled ? 1 : 0
  name          = "${var.name}-provisioner"
  network       = var.provisioner.network
  direction     = "INGRESS"
  source_ranges = var.provisioner.source_ranges
  target_tags   = ["${var.name}-provisioner"]
  allow {
    protocol = "tcp"
    ports    = [tostring(local.provisioner_port)]
  }
}

# ---- web UI: a public bucket website --------------------------------------------

resource "google_storage_bucket" "web" {
  name                        = "${var.project}-${var.name}-web"
  location                    = var.region
  uniform_bucket_level_access = true
  website {
    main_page_suffix = "index.html"
    not_found_page   = "index.html"
  }
}

resource "google_storage_bucket_iam_member" "web_public" {
  bucket = google_storage_bucket.web.name
  role   = "roles/storage.objectViewer"
  member = "allUsers"
}
