# The image every job runs (the Dockerfile at the repository root builds it).
resource "aws_ecr_repository" "this" {
  name = var.name_prefix
  # Immutable tags: a tag names exactly one build, so a job's image tag says what code ran, and a
  # re-push cannot change what a queued or retried job pulls. Push each build under a new tag.
  image_tag_mutability = "IMMUTABLE"
  force_delete         = var.ecr_force_delete

  image_scanning_configuration {
    scan_on_push = true
  }

  # The AWS-managed key (aws/ecr): encrypted at rest with KMS without a key to pay for and manage.
  encryption_configuration {
    encryption_type = "KMS"
  }
}

# Immutable tags pile up one image per build: keep the newest few.
resource "aws_ecr_lifecycle_policy" "this" {
  repository = aws_ecr_repository.this.name
  policy = jsonencode({
    rules = [{
      rulePriority = 1
      description  = "Keep the ${var.ecr_keep_images} most recent images"
      selection = {
        tagStatus   = "any"
        countType   = "imageCountMoreThan"
        countNumber = var.ecr_keep_images
      }
      action = { type = "expire" }
    }]
  })
}
