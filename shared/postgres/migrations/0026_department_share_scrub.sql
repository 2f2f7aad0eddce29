-- Deleting a department removes its id from every share_config that names
-- it (agents, knowledge_bases, skills: read_scope and manage_scope
-- department_ids), in the deleting transaction (issue 9). A trigger, so
-- that shared/auth (which owns departments) writes no other package's
-- table and no share_config keeps a dangling id.
CREATE FUNCTION share_config_without_department(sc jsonb, dept bigint) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE s text;
BEGIN
    IF sc IS NULL OR jsonb_typeof(sc) <> 'object' THEN
        RETURN sc;
    END IF;
    FOREACH s IN ARRAY ARRAY['read_scope', 'manage_scope'] LOOP
        IF jsonb_typeof(sc->s->'department_ids') = 'array' THEN
            sc := jsonb_set(sc, ARRAY[s, 'department_ids'], coalesce((SELECT jsonb_agg(e) FROM jsonb_array_elements(sc->s->'department_ids') e
                WHERE e <> to_jsonb(dept)), '[]'::jsonb));
        END IF;
    END LOOP;
    RETURN sc;
END $$;

CREATE FUNCTION departments_scrub_shares() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE agents SET share_config = share_config_without_department(share_config, OLD.id)
        WHERE share_config->'read_scope'->'department_ids' @> to_jsonb(OLD.id) OR share_config->'manage_scope'->'department_ids' @> to_jsonb(OLD.id);
    UPDATE knowledge_bases SET share_config = share_config_without_department(share_config, OLD.id)
        WHERE share_config->'read_scope'->'department_ids' @> to_jsonb(OLD.id) OR share_config->'manage_scope'->'department_ids' @> to_jsonb(OLD.id);
    UPDATE skills SET share_config = share_config_without_department(share_config, OLD.id)
        WHERE share_config->'read_scope'->'department_ids' @> to_jsonb(OLD.id) OR share_config->'manage_scope'->'department_ids' @> to_jsonb(OLD.id);
    RETURN OLD;
END $$;
CREATE TRIGGER departments_scrub_shares AFTER DELETE ON departments
    FOR EACH ROW EXECUTE FUNCTION departments_scrub_shares();
