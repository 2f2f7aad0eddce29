// The screens added after the first journey, in a real Chromium (see
// lib.mjs): knowledge-base extras, citations and math, artifact cards,
// administration of MCP servers, skills and the dashboard, the agent
// form's pickers, evaluation, the knowledge graph and the mind map. tests/web/extras_test.go starts the platform (scripted
// model, bwrap sandbox, the reference MCP server) and runs this script.
//
// Environment: BASE_URL, SHOTS, MD_FILE (a Markdown file for the KB),
// SKILL_FILE (a SKILL.md), MCP_URL (an MCP server), DIFY_URL (a fake Dify
// service API holding dataset ds-1, key dify-secret-key), CHROMIUM.
import { run, authed } from './lib.mjs'

const base = process.env.BASE_URL
const shots = process.env.SHOTS

await run('extras', shots, async ({ page, log, shot, allowErrors, fail }) => {
  const api = (path, init) => authed(page, path, init)
  const okJSON = async (path, init) => {
    const r = await api(path, init)
    if (r.status !== 200) fail(`${init?.method ?? 'GET'} ${path}: ${r.status} ${JSON.stringify(r.body)}`)
    return r.body
  }

  // Sign-in: the superadmin through the first-run screen.
  log('first run')
  await page.goto(base + '/login')
  await page.getByRole('heading', { name: 'Create the superadmin' }).waitFor()
  await page.fill('#uid', 'admin')
  await page.fill('#password', 'admin-password-1')
  await page.getByRole('button', { name: 'Create' }).click()
  await page.waitForURL('**/chat**')

  // 1. Knowledge base: a folder, an upload into it, indexed; the parsed
  // Markdown previewed and edited (with math), re-index, query test, sharing.
  log('knowledge base extras')
  await page.getByRole('link', { name: 'Knowledge' }).click()
  await page.getByTestId('kb-new').click()
  await page.fill('#kb-name', 'Handbook')
  await page.getByTestId('kb-create').click()
  await page.waitForURL(/\/knowledge\/[^/?]+$/)
  const kbId = new URL(page.url()).pathname.split('/').pop()
  await page.getByTestId('folder-name').fill('Policies')
  await page.getByTestId('folder-create').click()
  await page.locator('[data-testid=kb-files] tr[data-status=folder][data-file=Policies]').waitFor()
  await page.getByTestId('kb-folder').selectOption({ label: 'Policies' })
  await page.getByTestId('kb-auto-index').uncheck() // parsed, not indexed: its Markdown can be edited
  await page.getByTestId('kb-upload').setInputFiles(process.env.MD_FILE)
  const fileRow = page.locator('[data-testid=kb-files] tr[data-file="handbook.md"]')
  await page.locator('[data-testid=kb-files] tr[data-status=parsed][data-file="handbook.md"]').waitFor({ timeout: 60000 })
  const docs = (await okJSON(`/api/knowledge/databases/${kbId}/documents/search?limit=50`)).files
  const folderId = docs.find((f) => f.is_folder)?.file_id
  const fileId = docs.find((f) => !f.is_folder)?.file_id
  if (!folderId || docs.find((f) => f.file_id === fileId).parent_id !== folderId) fail('the upload did not land in the folder: ' + JSON.stringify(docs))
  await fileRow.getByTestId('open-doc').click()
  const doc = page.getByTestId('doc-panel')
  await doc.getByTestId('doc-content').getByText('25 days of paid vacation').waitFor()
  await doc.getByTestId('doc-edit').click()
  const src = await doc.getByTestId('doc-source').inputValue()
  await doc.getByTestId('doc-source').fill(src + '\nThe accrual is $\\frac{25}{12}$ days a month.\n')
  await doc.getByTestId('doc-save').click()
  await doc.getByTestId('doc-content').locator('.katex').first().waitFor() // KaTeX, loaded on demand
  const saved = await okJSON(`/api/knowledge/databases/${kbId}/documents/${fileId}/content`)
  if (!saved.content.includes('\\frac{25}{12}')) fail('the edited Markdown was not stored')
  await shot('kb-doc-preview')
  await fileRow.getByRole('checkbox').check()
  await page.getByTestId('kb-reindex').click()
  await page.getByRole('status').filter({ hasText: '1 files queued for indexing again.' }).waitFor()
  await page.locator('[data-testid=kb-files] tr[data-status=indexed][data-file="handbook.md"]').waitFor({ timeout: 60000 })
  await fileRow.getByRole('checkbox').check() // out of the folder again
  await page.getByTestId('kb-move-to').selectOption('')
  await page.getByTestId('kb-move').click()
  await page.getByRole('status').filter({ hasText: '1 files moved.' }).waitFor()
  const moved = (await okJSON(`/api/knowledge/databases/${kbId}/documents/search?limit=50`)).files.find((f) => f.file_id === fileId)
  if (moved?.parent_id) fail('the file is still in a folder: ' + JSON.stringify(moved))
  await page.getByTestId('kbtab-query').click()
  const qt = page.getByTestId('query-test')
  await qt.getByTestId('qt-query').fill('paid vacation')
  await qt.locator('[data-param=search_mode] select').selectOption('keyword')
  await qt.getByTestId('qt-run').click()
  await qt.getByTestId('qt-results').getByText('25 days of paid vacation').first().waitFor()
  await shot('kb-query-test')
  await page.getByTestId('kbtab-share').click()
  await page.getByTestId('share-global').check()
  await page.getByTestId('share-save').click()
  await page.getByRole('status').filter({ hasText: 'Saved.' }).waitFor()
  const kb = await okJSON(`/api/knowledge/databases/${kbId}`)
  if (kb.share_config?.read_scope?.access_level !== 'global') fail('share settings saved: ' + JSON.stringify(kb.share_config))
  await shot('kb-share')

  // 2. Chat: the answer cites the query_kb passages (linking to the
  // document view) and renders its math with KaTeX.
  log('citations and math')
  await page.getByRole('link', { name: 'Chat' }).click()
  await page.getByTestId('new-thread').click()
  await page.waitForURL('**/chat/*')
  await page.getByTestId('composer').fill('How many vacation days do we get?')
  await page.getByTestId('composer').press('Enter')
  const answer = page.locator('[data-testid=msg-ai]').filter({ hasText: 'Employees get 25 days' })
  await answer.locator('.katex').first().waitFor()
  await answer.locator('.math-display .katex-display').waitFor()
  const cite = page.getByTestId('citation').filter({ hasText: 'handbook.md' }).first()
  await cite.waitFor()
  await shot('chat-citations-math')
  await cite.click()
  await page.waitForURL((u) => u.pathname === `/knowledge/${kbId}` && u.searchParams.get('file') === fileId)
  await page.getByTestId('doc-panel').getByText('25 days of paid vacation').waitFor()

  // 3. Artifact cards: a file the agent wrote and presented shows as a card
  // on its message, opens in the files panel, downloads, and survives a reload.
  log('artifact cards')
  await okJSON('/api/agent', { method: 'POST', body: JSON.stringify({ name: 'Reporter', slug: 'reporter', config_json: { context: { tool_approval_mode: 'always_trust' } } }) })
  await page.getByRole('link', { name: 'Chat' }).click()
  await page.getByTestId('agent-pick').selectOption('reporter')
  const before = new URL(page.url()).pathname
  await page.getByTestId('new-thread').click()
  await page.waitForURL((u) => u.pathname !== before)
  await page.getByTestId('composer').fill('Write the quarterly report')
  await page.getByTestId('composer').press('Enter')
  await page.locator('[data-testid=msg-ai]').filter({ hasText: 'The report is ready.' }).waitFor({ timeout: 30000 })
  const card = page.locator('[data-testid=artifact-card][data-path="/home/gem/user-data/outputs/report.md"]')
  await card.waitFor()
  await page.reload()
  await card.getByRole('button', { name: 'Open' }).click()
  await page.getByTestId('file-preview').locator('.md').getByText('The okapi count rose to 12.').waitFor()
  await card.getByTestId('artifact-save').click()
  await card.getByRole('status').filter({ hasText: /Saved to .*report/ }).waitFor()
  await shot('artifact-card')
  const [dl] = await Promise.all([page.waitForEvent('download'), card.getByRole('button', { name: 'Download report.md' }).click()])
  if (dl.suggestedFilename() !== 'report.md') fail('artifact download name: ' + dl.suggestedFilename())
  await page.getByRole('button', { name: 'Close' }).click()

  // 4. MCP servers: add the reference server, list its tools, switch one
  // off, refresh, disable the server.
  log('mcp servers')
  await page.getByRole('link', { name: 'Administration' }).click()
  await page.getByTestId('tab-mcp').click()
  const mf = page.getByTestId('mcp-form')
  await mf.getByLabel('Name', { exact: true }).fill('Everything')
  await mf.getByLabel('Slug (optional)').fill('everything')
  await mf.getByLabel('Base URL').fill(process.env.MCP_URL)
  await page.getByTestId('mcp-create').click()
  const ev = page.locator('[data-testid=mcp-table] tr[data-mcp=everything]')
  await ev.getByText('Enabled').waitFor()
  await ev.getByTestId('mcp-tools').click()
  const echo = page.locator('[data-testid=mcp-tool-list] li[data-tool=echo]')
  await echo.getByRole('checkbox').uncheck()
  await page.locator('[data-testid=mcp-tool-list] li[data-tool=echo][data-enabled=false]').waitFor()
  const listed = (await okJSON('/api/system/mcp-servers')).data.find((x) => x.slug === 'everything')
  if (!listed?.disabled_tools?.includes('echo')) fail('echo is not disabled: ' + JSON.stringify(listed))
  await ev.getByTestId('mcp-refresh').click()
  await page.getByRole('status').filter({ hasText: 'tool list refreshed' }).waitFor()
  await shot('admin-mcp')

  // 5. Skills: a SKILL.md upload becomes a draft, confirmed into a skill.
  log('skills')
  await page.getByTestId('tab-skills').click()
  await page.getByTestId('skill-upload').setInputFiles(process.env.SKILL_FILE)
  await page.getByTestId('skill-draft').getByText('okapi-facts').first().waitFor()
  await shot('admin-skill-draft')
  await page.getByTestId('skill-confirm').click()
  const sk = page.locator('[data-testid=skill-table] tr[data-skill=okapi-facts]')
  await sk.getByText('Enabled').waitFor()
  await sk.getByRole('button', { name: 'Disable' }).click()
  await sk.getByText('Disabled').waitFor()
  await sk.getByRole('button', { name: 'Enable' }).click()
  await sk.getByText('Enabled').waitFor()
  await shot('admin-skills')

  // 6. Agent form: model, knowledge base, MCP server and skill are pickers
  // (the model list has the chat models of the enabled providers).
  log('agent pickers')
  await okJSON('/api/system/model-providers', { method: 'POST', body: JSON.stringify({ provider_id: 'acme', display_name: 'Acme', provider_type: 'openai',
    base_url: 'https://1.1.1.1/v1', capabilities: ['chat'], is_enabled: true, enabled_models: [{ id: 'acme-chat', type: 'chat', source: 'manual', display_name: 'Acme Chat' }] }) })
  await okJSON('/api/agent', { method: 'POST', body: JSON.stringify({ name: 'Researcher', slug: 'researcher', is_subagent: true }) })
  await page.getByRole('link', { name: 'Agents' }).click()
  await page.getByTestId('agent-new').click()
  const af = page.getByTestId('agent-form')
  await af.getByLabel('Name', { exact: true }).fill('Picker')
  await af.getByLabel('Slug (optional)').fill('picker')
  const modelSelect = af.locator('[data-item=model] select')
  await modelSelect.locator('option', { hasText: 'Acme Chat' }).waitFor({ state: 'attached' })
  const models = await modelSelect.locator('option').evaluateAll((os) => os.map((o) => o.value).filter((v) => v.includes('acme-chat')))
  await modelSelect.selectOption(models[0])
  await af.locator('[data-item=knowledges]').getByLabel('Handbook').check()
  await af.locator('[data-item=mcps]').getByLabel('Everything').check()
  await af.locator('[data-item=skills]').getByLabel('okapi-facts').check()
  await af.locator('[data-item=subagents]').getByLabel('Researcher').check()
  await shot('agent-pickers')
  await page.getByTestId('agent-save').click()
  await page.locator('[data-testid=agent-table] tr[data-agent=picker]').waitFor()
  const ctx = (await okJSON('/api/agent/picker')).config_json?.context ?? {}
  if (ctx.model !== models[0] || ctx.knowledges?.[0] !== kbId || ctx.mcps?.[0] !== 'everything' || ctx.skills?.[0] !== 'okapi-facts' || ctx.subagents?.[0] !== 'researcher') fail('picked context: ' + JSON.stringify(ctx))

  // 7. Delete the MCP server and the skill from their tables.
  log('deletes')
  await page.getByRole('link', { name: 'Administration' }).click()
  await page.getByTestId('tab-mcp').click()
  page.once('dialog', (d) => d.accept())
  await ev.getByRole('button', { name: 'Delete' }).click()
  await ev.waitFor({ state: 'detached' })
  await page.getByTestId('tab-skills').click()
  page.once('dialog', (d) => d.accept())
  await sk.getByRole('button', { name: 'Delete' }).click()
  await sk.waitFor({ state: 'detached' })

  // 8. Dashboard: totals and the charts (the chats above are counted).
  log('dashboard')
  await page.getByTestId('tab-dashboard').click()
  const dash = page.getByTestId('dashboard')
  await dash.getByTestId('line-chart').first().locator('path').first().waitFor()
  await dash.getByTestId('dash-kind').selectOption('tokens')
  await dash.getByTestId('line-chart').first().getByText('Tokens').first().waitFor()
  await dash.getByTestId('bar-list').getByText('query_kb').waitFor()
  await shot('admin-dashboard')

  // 9. Evaluation: a benchmark whose gold chunk is the handbook's passage,
  // a run with per-item results, the metric history, a gated schedule.
  log('evaluation')
  const hit = (await okJSON(`/api/knowledge/databases/${kbId}/query-test`, { method: 'POST', body: JSON.stringify({ query: 'paid vacation', options: { search_mode: 'keyword' } }) }))[0]
  if (!hit?.id) fail('no chunk to use as gold')
  await page.goto(`${base}/knowledge/${kbId}?tab=eval`)
  const evp = page.getByTestId('eval-panel')
  await evp.getByPlaceholder('Dataset name').fill('vacation-bench')
  await evp.getByTestId('dataset-upload').setInputFiles({ name: 'bench.jsonl', mimeType: 'application/octet-stream',
    buffer: Buffer.from(JSON.stringify({ query: 'How many days of paid vacation?', gold_chunk_ids: [hit.id] }) + '\n') })
  await evp.locator('[data-testid=dataset-table] tr[data-dataset=vacation-bench]').waitFor()
  await evp.getByTestId('run-start').click()
  await evp.locator('[data-testid=run-table] tr[data-status=completed]').waitFor({ timeout: 60000 })
  await evp.getByTestId('run-open').first().click()
  await evp.getByTestId('run-items').getByText('How many days of paid vacation?').waitFor()
  await evp.getByTestId('line-chart').locator('circle').first().waitFor() // the metric history (one point)
  await evp.getByTestId('schedule-form').getByLabel('Name', { exact: true }).fill('nightly')
  await evp.getByTestId('schedule-create').click()
  await evp.locator('[data-testid=schedule-table] tr[data-schedule=nightly]').getByText('Enabled').waitFor()
  await shot('evaluation')
  // A generated dataset: the model's first question is unusable, so the
  // generation fails with its message; Resume completes it.
  await evp.getByTestId('gen-name').fill('generated-bench')
  await evp.getByLabel('Questions').fill('1')
  await evp.getByTestId('gen-model').selectOption('fake:test-model')
  await evp.getByTestId('generate-start').click()
  const genRow = evp.locator('[data-testid=dataset-table] tr[data-dataset=generated-bench]')
  await evp.locator('[data-testid=dataset-table] tr[data-dataset=generated-bench][data-status=failed]').waitFor({ timeout: 60000 })
  await genRow.getByTestId('generation-message').waitFor()
  await genRow.getByTestId('dataset-resume').click()
  await evp.locator('[data-testid=dataset-table] tr[data-dataset=generated-bench][data-status=completed]').waitFor({ timeout: 60000 })
  const genDs = (await okJSON(`/api/evaluation/databases/${kbId}/datasets`)).data.find((d) => d.name === 'generated-bench')
  if (genDs?.item_count !== 1) fail('generated dataset: ' + JSON.stringify(genDs))
  await evp.locator('#run-ds option', { hasText: 'generated-bench' }).waitFor({ state: 'attached' })
  await shot('evaluation-generated')

  // 10. Knowledge graph: configure the extractor and build; the subgraph
  // is drawn and a node shows its description; then the mind map.
  log('graph and mind map')
  await page.goto(`${base}/knowledge/${kbId}?tab=graph`)
  const gp = page.getByTestId('graph-panel')
  await gp.getByTestId('graph-model').selectOption('fake:test-model') // the scripted model (the platform's default)
  await gp.getByTestId('graph-build').click()
  await gp.locator('[data-testid=graph-status][data-status=done]').waitFor({ timeout: 60000 })
  const node = gp.locator('[data-testid=graph-node][data-label=Employees]')
  await node.waitFor()
  await node.focus()
  await page.keyboard.press('Enter')
  await gp.getByTestId('graph-picked').getByText('the staff').waitFor()
  await gp.getByTestId('mindmap-generate').click()
  await gp.getByTestId('mindmap').getByText('handbook.md').waitFor()
  await shot('graph-mindmap')

  // 11. A Dify knowledge base: the create form's connection fields come
  // from the type's create_params (the key is a password input, never shown
  // again); the KB is read-only (no files tab, no upload) and its query test
  // answers from the remote dataset.
  log('dify connector')
  await page.goto(`${base}/knowledge`)
  await page.getByTestId('kb-new').click()
  await page.fill('#kb-name', 'Dify docs')
  await page.getByTestId('kb-type').selectOption('dify')
  const conn = page.getByTestId('kb-connection')
  if (await conn.locator('#kbp-dify_token').getAttribute('type') !== 'password') fail('the Dify key is not a password input')
  await conn.locator('#kbp-dify_api_url').fill(process.env.DIFY_URL)
  await conn.locator('#kbp-dify_token').fill('dify-secret-key')
  await conn.locator('#kbp-dify_dataset_id').fill('ds-1')
  await shot('kb-create-dify')
  await page.getByTestId('kb-create').click()
  await page.waitForURL((u) => /^\/knowledge\/[^/]+$/.test(u.pathname) && !u.pathname.endsWith('/' + kbId))
  const difyId = new URL(page.url()).pathname.split('/').pop()
  const ro = page.getByTestId('kb-readonly')
  await ro.locator('dd[data-param=dify_dataset_id]').getByText('ds-1').waitFor()
  if (await page.getByTestId('kbtab-files').count() || await page.getByTestId('kb-upload').count()) fail('document routes shown for a read-only KB')
  const difyKB = await api(`/api/knowledge/databases/${difyId}`)
  if (difyKB.status !== 200 || difyKB.body.kb_type !== 'dify' || difyKB.body.supports_documents !== false || JSON.stringify(difyKB.body).includes('dify-secret-key')) fail('the Dify KB: ' + JSON.stringify(difyKB))
  if ((await page.content()).includes('dify-secret-key')) fail('the Dify key is shown on the page')
  const dq = page.getByTestId('query-test')
  await dq.getByTestId('qt-query').fill('refunds')
  await dq.getByTestId('qt-run').click()
  await dq.getByTestId('qt-results').getByText('Dify says: refunds is in the manual.').waitFor()
  await shot('kb-dify-query')

  // 12. Agent evaluation suites: create one with two items (one whose
  // check the scripted answer "OK." passes, one it fails), run it, and see
  // the per-item results.
  log('evaluation suites')
  await page.getByRole('link', { name: 'Evaluation' }).click()
  await page.getByTestId('suite-new').click()
  const sf = page.getByTestId('suite-form')
  await sf.getByLabel('Name', { exact: true }).fill('smoke')
  await sf.getByLabel('Agent').selectOption('reporter')
  await sf.getByTestId('suite-input').nth(0).fill('Say something short')
  await sf.getByTestId('suite-contains').nth(0).fill('OK')
  await sf.getByTestId('suite-add-item').click()
  await sf.getByTestId('suite-input').nth(1).fill('Say the secret word')
  await sf.getByTestId('suite-contains').nth(1).fill('never-there')
  await page.getByTestId('suite-create').click()
  await page.locator('[data-testid=suite-table] tr[data-suite=smoke]').waitFor()
  await page.getByTestId('suite-detail').getByRole('heading', { name: 'smoke' }).waitFor()
  await page.getByTestId('suite-run').click()
  await page.locator('[data-testid=suite-runs] tr[data-status=completed]').waitFor({ timeout: 90000 })
  const sItems = page.getByTestId('suite-run-items')
  await sItems.locator('tr[data-passed=true]').filter({ hasText: 'Say something short' }).waitFor()
  await sItems.locator('tr[data-passed=false]').filter({ hasText: 'Say the secret word' }).waitFor()
  const suite = (await okJSON('/api/evaluation/suites')).data.find((x) => x.name === 'smoke')
  if (suite?.agent_slug !== 'reporter' || suite.items.length !== 2 || suite.items[1].checks?.[0]?.value !== 'never-there') fail('stored suite: ' + JSON.stringify(suite))
  await shot('eval-suites')

  // 13. The new screens in Chinese: the knowledge base's tabs, the administration tabs,
  // the connector create form, the suites screen.
  await page.goto(`${base}/knowledge/${kbId}?tab=graph`)
  await page.getByTestId('graph-panel').waitFor()
  await page.getByTestId('lang').click()
  await page.getByRole('button', { name: '图谱与导图' }).waitFor()
  await page.getByRole('button', { name: '评估' }).click()
  await page.getByRole('heading', { name: '评估数据集' }).waitFor()
  await page.goto(`${base}/admin/mcp`)
  await page.getByRole('heading', { name: '添加 MCP 服务' }).waitFor()
  await shot('admin-mcp-zh')
  await page.goto(`${base}/knowledge`)
  await page.getByTestId('kb-new').click()
  await page.getByTestId('kb-type').selectOption('notion')
  await page.getByTestId('kb-connection').getByText('集成令牌').waitFor()
  await page.getByRole('columnheader', { name: '类型' }).waitFor()
  await shot('kb-create-notion-zh')
  await page.getByRole('link', { name: '评估' }).click()
  await page.getByRole('heading', { name: '智能体评估' }).waitFor()
})
