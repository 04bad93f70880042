# The run store: an S3 bucket whose runs/ prefix holds each job's run folder (checkpoint, TensorBoard log, saved
# model), so that an attempt Batch retries on a new instance goes on from the last checkpoint
# (cleanrl_utils/run_store.py; the submission tool points jobs at it through the run_store output).
# Private (public access blocked, ACLs off, TLS only), encrypted with KMS, and the job role may read and write
# runs/ and nothing else in it.

locals {
  run_store_prefix = "runs"
}

resource "aws_s3_bucket" "runs" {
  #checkov:skip=CKV_AWS_18:Access logs of the run store would need a second bucket and cost more than the checkpoints they describe; CloudTrail records the bucket-level API calls.
  #checkov:skip=CKV_AWS_21:Versioning would keep every overwritten checkpoint (up to several GiB each, one per checkpoint interval); a checkpoint is replaced whole or not at all, so the last one is always readable without it.
  #checkov:skip=CKV_AWS_144:Cross-region replication doubles the storage of run folders that can be recomputed; a lost region loses running jobs anyway.
  #checkov:skip=CKV2_AWS_62:No consumer of object events: jobs read their own folder when they start, the submission tool lists it.
  bucket_prefix = "${substr(var.name_prefix, 0, 26)}-runs-"
  force_destroy = var.run_store_force_destroy
}

resource "aws_s3_bucket_public_access_block" "runs" {
  bucket                  = aws_s3_bucket.runs.id
  block_public_acls       = true
  block_public_policy     = true
  ignore_public_acls      = true
  restrict_public_buckets = true
}

resource "aws_s3_bucket_ownership_controls" "runs" {
  bucket = aws_s3_bucket.runs.id
  rule {
    object_ownership = "BucketOwnerEnforced" # ACLs off: access is the IAM policies' alone
  }
}

# The AWS-managed key (aws/s3), which any principal of the account that may use the bucket may use through S3:
# no key policy to maintain, no monthly key fee; the bucket key cuts the KMS requests (and their cost) per object.
resource "aws_s3_bucket_server_side_encryption_configuration" "runs" {
  bucket = aws_s3_bucket.runs.id
  rule {
    apply_server_side_encryption_by_default {
      sse_algorithm = "aws:kms"
    }
    bucket_key_enabled = true
  }
}

resource "aws_s3_bucket_lifecycle_configuration" "runs" {
  bucket = aws_s3_bucket.runs.id

  rule {
    id     = "run-folders"
    status = "Enabled"
    filter {} # the whole bucket: it holds the run folders only
    # an upload cut short (a reclaimed instance) leaves parts that are billed until they are aborted
    abort_incomplete_multipart_upload {
      days_after_initiation = 1
    }
    dynamic "expiration" {
      for_each = var.run_store_expiration_days == null ? [] : [var.run_store_expiration_days]
      content {
        days = expiration.value
      }
    }
  }
}

# Encrypted connections only, whoever asks.
resource "aws_s3_bucket_policy" "runs" {
  bucket = aws_s3_bucket.runs.id
  policy = jsonencode({
    Version = "2012-10-17"
    Statement = [{
      Sid       = "TlsOnly"
      Effect    = "Deny"
      Principal = "*"
      Action    = "s3:*"
      Resource  = [aws_s3_bucket.runs.arn, "${aws_s3_bucket.runs.arn}/*"]
      Condition = { Bool = { "aws:SecureTransport" = "false" } }
    }]
  })
  # a bucket policy is refused while the public access block is being set up
  depends_on = [aws_s3_bucket_public_access_block.runs]
}

# The job role (the training code) reads and writes runs/ and nothing else: no other prefix, no deletes, no
# bucket settings. Listing is limited to runs/ too.
resource "aws_iam_role_policy" "job_run_store" {
  name = "${var.name_prefix}-job-run-store"
  role = aws_iam_role.job.id
  policy = jsonencode({
    Version = "2012-10-17"
    Statement = [
      {
        Sid      = "ReadWriteRunFolders"
        Effect   = "Allow"
        Action   = ["s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload"]
        Resource = ["${aws_s3_bucket.runs.arn}/${local.run_store_prefix}/*"]
      },
      {
        Sid       = "ListRunFolders"
        Effect    = "Allow"
        Action    = ["s3:ListBucket"]
        Resource  = [aws_s3_bucket.runs.arn]
        Condition = { StringLike = { "s3:prefix" = ["${local.run_store_prefix}/*"] } }
      },
    ]
  })
}
