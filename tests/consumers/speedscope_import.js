#!/usr/bin/env node
// Checks pyscope's speedscope output with what the published `speedscope`
// npm package ships. The package holds only the browser app (one bundled
// script, no importable module), so the file is validated against the JSON
// schema that ships with it (dist/release/file-format-schema.json) using
// ajv, and then walked the way speedscope's importer (importSpeedscopeProfile
// in src/lib/file-format.ts) builds its profiles: samples and weights pair up,
// every frame index resolves, and each profile's total weight is summed.
//
// Usage: NODE_PATH=<dir with speedscope and ajv> node speedscope_import.js FILE...
// Prints one line per profile and one per file; exits 1 on any problem.
'use strict'

const fs = require('fs')
const path = require('path')

function loadDependencies() {
  try {
    const Ajv = require('ajv')
    const schemaPath = path.join(path.dirname(require.resolve('speedscope/package.json')),
                                 'dist', 'release', 'file-format-schema.json')
    const version = require('speedscope/package.json').version
    return {Ajv, schema: JSON.parse(fs.readFileSync(schemaPath, 'utf8')), version}
  } catch (err) {
    console.error(`speedscope_import: ${err.message}`)
    console.error('install them with: npm install --prefix DIR speedscope ajv, ' +
                  'then run with NODE_PATH=DIR/node_modules')
    process.exit(2)
  }
}

const UNITS = new Set(['none', 'nanoseconds', 'microseconds', 'milliseconds', 'seconds', 'bytes'])

// The importer's own expectations, beyond what the schema can say.
function importProfiles(file, problems) {
  const frames = file.shared.frames
  const result = []
  if (!Array.isArray(file.profiles) || file.profiles.length === 0) {
    problems.push('no profiles: speedscope would have nothing to show')
    return result
  }
  const active = file.activeProfileIndex || 0
  if (!Number.isInteger(active) || active < 0 || active >= file.profiles.length) {
    problems.push(`activeProfileIndex ${file.activeProfileIndex} is not a profile`)
  }
  file.profiles.forEach((profile, i) => {
    const where = `profile ${i} (${profile.name})`
    if (profile.type !== 'sampled') {
      problems.push(`${where}: type ${profile.type}, pyscope writes sampled profiles`)
      return
    }
    if (!UNITS.has(profile.unit)) problems.push(`${where}: unknown unit ${profile.unit}`)
    if (profile.endValue < profile.startValue) problems.push(`${where}: endValue < startValue`)
    if (profile.samples.length !== profile.weights.length) {
      problems.push(`${where}: ${profile.samples.length} samples but ${profile.weights.length} weights`)
      return
    }
    let total = 0
    const used = new Set()
    profile.samples.forEach((stack, s) => {
      for (const index of stack) {
        if (!Number.isInteger(index) || index < 0 || index >= frames.length) {
          problems.push(`${where}: sample ${s} names frame ${index}, there are ${frames.length}`)
        } else {
          used.add(index)
        }
      }
      const weight = profile.weights[s]
      if (!(weight >= 0)) problems.push(`${where}: sample ${s} has weight ${weight}`)
      total += weight
    })
    const span = profile.endValue - profile.startValue
    if (total > span * (1 + 1e-9) + 1e-9) {
      problems.push(`${where}: weights add up to ${total}, more than endValue - startValue = ${span}`)
    }
    result.push({name: profile.name, unit: profile.unit, samples: profile.samples.length,
                 frames: used.size, total})
  })
  return result
}

function main(files) {
  if (files.length === 0) {
    console.error('usage: node speedscope_import.js FILE...')
    return 2
  }
  const {Ajv, schema, version} = loadDependencies()
  const validate = new Ajv({allErrors: true, strict: false}).compile(schema)
  let failed = false
  for (const file of files) {
    const problems = []
    let data
    try {
      data = JSON.parse(fs.readFileSync(file, 'utf8'))
    } catch (err) {
      console.log(`${file}: not JSON: ${err.message}`)
      failed = true
      continue
    }
    if (data.$schema !== 'https://www.speedscope.app/file-format-schema.json') {
      problems.push('$schema is not speedscope\'s: the importer would not recognise the file')
    }
    if (!validate(data)) {
      for (const err of validate.errors.slice(0, 20)) {
        problems.push(`schema: ${err.instancePath || '/'} ${err.message}`)
      }
    }
    const profiles = problems.length ? [] : importProfiles(data, problems)
    for (const p of profiles) {
      console.log(`${file}: profile "${p.name}": ${p.samples} samples, ${p.frames} frames, ` +
                  `total weight ${+p.total.toFixed(6)} ${p.unit}`)
    }
    if (problems.length) {
      failed = true
      for (const problem of problems) console.log(`${file}: ${problem}`)
    } else {
      console.log(`${file}: speedscope ${version} schema OK: ${data.shared.frames.length} frames, ` +
                  `${data.profiles.length} profiles, exporter ${data.exporter}`)
    }
  }
  return failed ? 1 : 0
}

process.exit(main(process.argv.slice(2)))
