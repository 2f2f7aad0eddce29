-- Chat additions (issue 9): message feedback, projects, uploaded chat images.
-- Owners: shared/thread owns message_feedbacks and projects (a project
-- groups a user's threads); shared/chatimage owns chat_images.

-- One feedback per user per message; a second submission edits it.
CREATE TABLE message_feedbacks (
    id          bigserial PRIMARY KEY,
    message_id  bigint NOT NULL REFERENCES messages (id) ON DELETE CASCADE,
    uid         text NOT NULL,
    rating      text NOT NULL CHECK (rating IN ('like', 'dislike')),
    reason      text,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    UNIQUE (message_id, uid)
);
CREATE INDEX message_feedbacks_created ON message_feedbacks (created_at DESC);

-- A project groups threads and owns a managed working folder
-- (workdir_path, relative to the sandbox provisioner's volume). Linked
-- projects (any host folder) are refused: directory_mode is always managed.
CREATE TABLE projects (
    id                text PRIMARY KEY,
    uid               text NOT NULL,
    name              text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    selection_status  text NOT NULL DEFAULT 'selectable' CHECK (selection_status IN ('implicit', 'selectable')),
    directory_mode    text NOT NULL DEFAULT 'managed' CHECK (directory_mode = 'managed'),
    workdir_path      text NOT NULL UNIQUE,
    idempotency_key   text,
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    UNIQUE (id, uid),
    UNIQUE (uid, idempotency_key)
);
CREATE INDEX projects_uid ON projects (uid, updated_at DESC);

-- A thread may belong to one of its owner's projects.
ALTER TABLE conversations ADD COLUMN project_id text;
ALTER TABLE conversations ADD CONSTRAINT conversations_project_fk FOREIGN KEY (project_id, uid) REFERENCES projects (id, uid);
CREATE INDEX conversations_project ON conversations (project_id) WHERE project_id IS NOT NULL;

-- Images uploaded for chat messages (/api/chat/image/upload). message_id is
-- set when a message references the image; unreferenced rows older than the
-- sweep's grace period are deleted with their objects.
CREATE TABLE chat_images (
    image_id    text PRIMARY KEY,
    uid         text NOT NULL,
    object_key  text NOT NULL UNIQUE,
    mime_type   text NOT NULL,
    size_bytes  bigint NOT NULL,
    width       int NOT NULL,
    height      int NOT NULL,
    message_id  bigint REFERENCES messages (id) ON DELETE SET NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX chat_images_unreferenced ON chat_images (created_at) WHERE message_id IS NULL;
